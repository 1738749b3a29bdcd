// Schemas and shape inference of the detection op family.
#include "core/op_schema.hpp"

namespace quilt {

void register_detection_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace quilt
