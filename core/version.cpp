// quilt::version(): the version of the library, from the header it was built with.
#include "quilt/quilt.hpp"

namespace quilt {

const char* version() {
  return QUILT_VERSION_STRING;
}

}  // namespace quilt
