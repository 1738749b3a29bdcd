// ONNX ModelProto / TensorProto -> core IR, using the protobuf classes of Debian's libonnx.
#pragma once

#include <span>
#include <string>

#include "core/graph.hpp"

namespace quilt {

// Loads a model file. External-data files are resolved relative to the model's directory and
// may not escape it. Throws Error(Io) when the file cannot be read, Error(InvalidModel) when it
// is not a valid ONNX model.
Model load_model_file(const std::string& path);
// Parses a serialized ModelProto. external_data_dir = "" forbids external data.
Model load_model_bytes(std::span<const std::byte> bytes, const std::string& external_data_dir,
                       const std::string& display_name = "<bytes>");
// Reads a file holding one serialized TensorProto (the ONNX test-data format).
Tensor load_tensor_file(const std::string& path);
// Reads a file holding one value of the declared type: a TensorProto, SequenceProto, MapProto
// or OptionalProto (the files do not say which). Maps' values must be scalars.
Value load_value_file(const std::string& path, const ValueInfo& declared);
// Writes a tensor as a serialized TensorProto.
void save_tensor_file(const Tensor& tensor, const std::string& path, const std::string& name = "");

}  // namespace quilt
