// Schemas of the smaller ops the misc family picked up from the conformance suite.
#include "core/op_schema.hpp"

namespace quilt {

void register_misc_extra_schemas(SchemaRegistry& r) {
  (void)r;
}

}  // namespace quilt
