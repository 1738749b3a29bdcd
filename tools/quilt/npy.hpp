// NumPy .npy files (format versions 1-3, little-endian, C order) <-> quilt::Tensor.
#pragma once

#include <string>

#include "quilt/quilt.hpp"

namespace quilt::cli {

// Throws Error(InvalidArgument) naming the file on a malformed or unsupported file.
Tensor read_npy(const std::string& path);
void write_npy(const Tensor& tensor, const std::string& path);

}  // namespace quilt::cli
