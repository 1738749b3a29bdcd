// Schemas and shape inference of the attention op family.
#include "core/op_schema.hpp"

namespace quilt {

void register_attention_schemas(SchemaRegistry& r) { (void)r; }

}  // namespace quilt
