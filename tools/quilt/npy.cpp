#include "tools/quilt/npy.hpp"

#include "core/parse_int.hpp"
#include "tools/quilt/cli.hpp"

#include <algorithm>
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

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// The code points of a UTF-8 string; a byte that does not start a valid sequence is read as
// the code point of the same value (Latin-1), so that any bytes round-trip through numpy.
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int extra = b >= 0xF0 && b < 0xF8 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    uint32_t c = extra == 3 ? b & 0x07u : extra == 2 ? b & 0x0Fu : extra == 1 ? b & 0x1Fu : b;
    bool ok = b < 0x80 || (extra > 0 && i + static_cast<size_t>(extra) < s.size());
    for (int k = 1; ok && k <= extra; ++k) {
      const auto n = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = (n & 0xC0) == 0x80;
      c = (c << 6) | (n & 0x3Fu);
    }
    if (!ok) {
      out.push_back(b);
      ++i;
      continue;
    }
    out.push_back(c);
    i += 1 + static_cast<size_t>(extra);
  }
  return out;
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
  // The patterns are compiled once, not per file: compiling them was most of a small file's
  // read (the npy fuzzer, ASan build: 273 -> 1,249 inputs a second).
  static const std::regex descr("'descr'\\s*:\\s*'([<>|=])([a-zA-Z][0-9]*)'");
  static const std::regex fortran("'fortran_order'\\s*:\\s*True");
  static const std::regex shape_re("'shape'\\s*:\\s*\\(([^)]*)\\)");
  if (!std::regex_search(header, m, descr)) bad(path, "header has no descr");
  if (m[1] == ">") bad(path, "big-endian data is not supported");
  // Strings: numpy's str_ ('U': fixed-width UTF-32) and bytes_ ('S': fixed-width bytes).
  const std::string code = m[2].str();
  const bool unicode = code[0] == 'U', bytes_str = code[0] == 'S';
  uint64_t width = 0;
  if (unicode || bytes_str) {
    const auto w = parse_int64(code.substr(1));
    if (!w || *w < 0) bad(path, "string dtype '" + code + "' has no width");
    width = static_cast<uint64_t>(*w);
  } else if (code == "O") {
    bad(path,
        "object arrays are pickled Python objects, which Quilt does not read; save strings as "
        "numpy str_ (np.array(values, dtype=str))");
  }
  auto it = descr_table().find(code);
  if (!unicode && !bytes_str && it == descr_table().end())
    bad(path, "unsupported dtype '" + code + "'");
  DType dtype = unicode || bytes_str ? DType::String : it->second;
  if (std::regex_search(header, fortran))
    bad(path, "Fortran-ordered arrays are not supported; save with np.ascontiguousarray");
  if (!std::regex_search(header, m, shape_re)) bad(path, "header has no shape");
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
  uint64_t bytes = dtype == DType::String ? width * (unicode ? 4 : 1) : dtype_size(dtype);
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
  if (dtype == DType::String) {
    std::string raw(static_cast<size_t>(bytes), '\0');
    if (!f.read(raw.data(), static_cast<std::streamsize>(bytes))) bad(path, "cannot read its data");
    const size_t item = static_cast<size_t>(width) * (unicode ? 4 : 1);
    for (int64_t i = 0; i < t.numel(); ++i) {
      std::string& out = t.data<std::string>()[i];
      const char* p = raw.data() + static_cast<size_t>(i) * item;
      if (bytes_str) {
        out.assign(p, strnlen(p, item));
        continue;
      }
      for (uint64_t k = 0; k < width; ++k) {
        const auto* b = reinterpret_cast<const unsigned char*>(p + 4 * k);
        const uint32_t c = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
        if (c == 0) break;
        if (c > 0x10FFFF) bad(path, "element " + std::to_string(i) + " is not valid UTF-32");
        append_utf8(out, c);
      }
    }
    return t;
  }
  if (!f.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes())))
    bad(path, "cannot read its data");
  return t;
}

void write_npy(const Tensor& tensor, const std::string& path) {
  std::string descr;
  for (const auto& [d, t] : descr_table())
    if (t == tensor.dtype()) descr = (d == "u1" || d == "i1" || d == "b1" ? "|" : "<") + d;
  // Strings as numpy str_: UTF-32, as wide as the longest (at least 1, as numpy makes them).
  std::vector<std::vector<uint32_t>> text;
  size_t width = 1;
  if (tensor.dtype() == DType::String) {
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      text.push_back(code_points(tensor.data<std::string>()[i]));
      width = std::max(width, text.back().size());
    }
    descr = "<U" + std::to_string(width);
  }
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
  if (tensor.dtype() == DType::String) {
    std::string raw(width * 4 * text.size(), '\0');
    for (size_t i = 0; i < text.size(); ++i)
      for (size_t k = 0; k < text[i].size(); ++k)
        for (size_t b = 0; b < 4; ++b)
          raw[(i * width + k) * 4 + b] = static_cast<char>((text[i][k] >> (8 * b)) & 0xFF);
    f.write(raw.data(), static_cast<std::streamsize>(raw.size()));
  } else {
    f.write(static_cast<const char*>(tensor.raw_data()),
            static_cast<std::streamsize>(tensor.nbytes()));
  }
  if (!f) throw Error(ErrorCode::Io, "error writing npy file '" + path + "'");
}

}  // namespace quilt::cli
