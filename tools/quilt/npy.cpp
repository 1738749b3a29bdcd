#include "tools/quilt/npy.hpp"

#include "core/parse_int.hpp"
#include "tools/quilt/cli.hpp"

#include <cstring>
#include <fstream>
#include <map>
#include <regex>

namespace quilt::cli {
namespace {

const std::map<std::string, DType>& descr_table() {
  static const std::map<std::string, DType> t = {
      {"f2", DType::Float16}, {"f4", DType::Float32}, {"f8", DType::Float64}, {"i1", DType::Int8},
      {"i2", DType::Int16},   {"i4", DType::Int32},   {"i8", DType::Int64},   {"u1", DType::UInt8},
      {"u2", DType::UInt16},  {"u4", DType::UInt32},  {"u8", DType::UInt64},  {"b1", DType::Bool}};
  return t;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "npy file '" + path + "': " + what);
}

}  // namespace

Tensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Io, "cannot open npy file '" + path + "'");
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    bad(path, "not a .npy file (bad magic)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    if (!f.read(reinterpret_cast<char*>(b), 2)) bad(path, "truncated header");
    header_len = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    if (!f.read(reinterpret_cast<char*>(b), 4)) bad(path, "truncated header");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    bad(path, "unsupported format version " + std::to_string(magic[6]));
  }
  if (header_len > (1u << 20)) bad(path, "header too large");
  std::string header(header_len, '\0');
  if (!f.read(header.data(), header_len)) bad(path, "truncated header");
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([<>|=])([a-z][0-9]+)'")))
    bad(path, "header has no descr");
  if (m[1] == ">") bad(path, "big-endian data is not supported");
  auto it = descr_table().find(m[2]);
  if (it == descr_table().end()) bad(path, "unsupported dtype '" + m[2].str() + "'");
  DType dtype = it->second;
  if (std::regex_search(header, std::regex("'fortran_order'\\s*:\\s*True")))
    bad(path, "Fortran-ordered arrays are not supported; save with np.ascontiguousarray");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    bad(path, "header has no shape");
  const std::string dims = m[1];
  std::vector<int64_t> shape;
  const std::vector<std::string> parts = split(dims, ',');
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string dim = trim(parts[i]);
    if (dim.empty() && i + 1 == parts.size() && i > 0) break;  // "(3,)"
    if (dim.empty() && parts.size() == 1) break;               // "()": a scalar
    const auto v = parse_int64(dim);
    if (!v || *v < 0)
      bad(path, "shape (" + dims + ") has dim '" + dim + "', expected a non-negative integer");
    shape.push_back(*v);
  }
  // Check the size against the file before allocating: a small file may declare a huge shape.
  uint64_t bytes = dtype_size(dtype);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      bad(path, "shape " + to_string(shape) + " is too large");
  const std::streamoff data_start = f.tellg();
  f.seekg(0, std::ios::end);
  const auto available = static_cast<uint64_t>(f.tellg() - data_start);
  f.seekg(data_start);
  if (available < bytes)
    bad(path, "data is truncated: expected " + std::to_string(bytes) + " bytes for shape " +
                  to_string(shape) + ", the file has " + std::to_string(available));
  Tensor t = Tensor::uninitialized(dtype, shape);
  if (!f.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes())))
    bad(path, "cannot read its data");
  return t;
}

void write_npy(const Tensor& tensor, const std::string& path) {
  std::string descr;
  for (const auto& [d, t] : descr_table())
    if (t == tensor.dtype()) descr = (d == "u1" || d == "i1" || d == "b1" ? "|" : "<") + d;
  if (descr.empty())
    throw Error(ErrorCode::InvalidArgument,
                std::string("cannot write dtype ") + dtype_name(tensor.dtype()) + " to npy");
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape().size(); ++i)
    shape += std::to_string(tensor.shape()[i]) +
             (tensor.shape().size() == 1 ? "," : (i + 1 < tensor.shape().size() ? ", " : ""));
  shape += ")";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Io, "cannot write npy file '" + path + "'");
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(len_bytes, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(tensor.raw_data()),
          static_cast<std::streamsize>(tensor.nbytes()));
  if (!f) throw Error(ErrorCode::Io, "error writing npy file '" + path + "'");
}

}  // namespace quilt::cli
