// Graph validation: reports every problem at once, each naming its node or value.
#pragma once

#include <string>

#include "core/graph.hpp"
#include "core/op_schema.hpp"

namespace quilt {

// Checks for duplicate value definitions, undefined inputs, undefined graph outputs, cycles,
// domains without an opset import, and ops without a schema at the node's opset. Throws one
// Error listing every problem: InvalidModel if the graph is malformed, NotImplemented if it is
// well-formed but uses ops Quilt does not know.
void validate_model(const Model& model, const SchemaRegistry& schemas);

}  // namespace quilt
