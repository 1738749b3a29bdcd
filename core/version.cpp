// quilt::version(): the project's version, given by CMake to this file alone.
#include "quilt/quilt.hpp"

namespace quilt {

const char* version() {
  return QUILT_VERSION;
}

}  // namespace quilt
