// ImageDecoder's decoding, shared by shape inference (the output shape is in the image header)
// and the CPU kernel. Handles uncompressed 24-bit BMP, 8-bit PNM (P2, P3, P5, P6),
// uncompressed 8-bit TIFF and 8-bit grey/RGB PNG; any other format is reported as not
// implemented.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/ops/misc_inflate.hpp"

namespace quilt {

// Larger sides are rejected as malformed, which also keeps every size product in range.
inline constexpr int64_t kMaxImageSide = int64_t{1} << 20;

struct DecodedImage {
  int64_t height = 0, width = 0, channels = 0;  // channels: 3 (RGB) or 1 (grey)
  std::vector<uint8_t> pixels;                  // row-major H x W x channels
};

// Baseline TIFF: the first image, uncompressed, 8-bit RGB or grey, chunky, in strips.
inline std::string decode_tiff(const uint8_t* data, size_t size, DecodedImage& out,
                               bool* unsupported) {
  const bool little = data[0] == 'I';
  auto get = [&](size_t at, int bytes) -> uint64_t {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= static_cast<uint64_t>(data[at + static_cast<size_t>(little ? i : bytes - 1 - i)])
           << (8 * i);
    return v;
  };
  const uint64_t ifd = get(4, 4);
  if (ifd + 2 > size) return "TIFF directory offset is out of range";
  const uint64_t entries = get(ifd, 2);
  if (ifd + 2 + entries * 12 > size) return "TIFF directory is truncated";
  int64_t width = 0, height = 0, compression = 1, photometric = -1, samples = 1, planar = 1;
  int64_t rows_per_strip = -1;
  std::vector<uint64_t> bits, offsets, counts;
  // All values of one entry (inline when they fit in 4 bytes).
  auto values = [&](size_t entry, std::vector<uint64_t>& v) {
    const uint64_t type = get(entry + 2, 2), n = get(entry + 4, 4);
    const int width_bytes = type == 3 ? 2 : type == 4 ? 4 : type == 1 ? 1 : 0;
    if (width_bytes == 0 || n > (1u << 24)) return false;
    const uint64_t at = n * static_cast<uint64_t>(width_bytes) <= 4 ? entry + 8 : get(entry + 8, 4);
    if (at + n * static_cast<uint64_t>(width_bytes) > size) return false;
    v.clear();
    for (uint64_t i = 0; i < n; ++i)
      v.push_back(get(at + i * static_cast<uint64_t>(width_bytes), width_bytes));
    return true;
  };
  std::vector<uint64_t> v;
  for (uint64_t e = 0; e < entries; ++e) {
    const size_t entry = ifd + 2 + e * 12;
    const uint64_t tag = get(entry, 2);
    if (tag != 256 && tag != 257 && tag != 258 && tag != 259 && tag != 262 && tag != 273 &&
        tag != 277 && tag != 278 && tag != 279 && tag != 284)
      continue;
    if (!values(entry, v) || v.empty()) return "TIFF tag " + std::to_string(tag) + " is malformed";
    const auto first = static_cast<int64_t>(v[0]);
    switch (tag) {
      case 256:
        width = first;
        break;
      case 257:
        height = first;
        break;
      case 258:
        bits = v;
        break;
      case 259:
        compression = first;
        break;
      case 262:
        photometric = first;
        break;
      case 273:
        offsets = v;
        break;
      case 277:
        samples = first;
        break;
      case 278:
        rows_per_strip = first;
        break;
      case 279:
        counts = v;
        break;
      default:
        planar = first;
        break;
    }
  }
  const bool rgb = photometric == 2 && samples == 3, grey = photometric == 1 && samples == 1;
  bool eight = !bits.empty();
  for (uint64_t b : bits) eight = eight && b == 8;
  if (compression != 1 || (!rgb && !grey) || !eight || planar != 1) {
    *unsupported = true;
    return "only uncompressed 8-bit RGB or grey TIFF is supported";
  }
  if (width <= 0 || height <= 0 || width > kMaxImageSide || height > kMaxImageSide ||
      offsets.empty() || offsets.size() != counts.size())
    return "TIFF image size or strips are malformed";
  if (rows_per_strip <= 0 || rows_per_strip > height) rows_per_strip = height;
  const int64_t row_bytes = width * samples;
  out = {height, width, samples, std::vector<uint8_t>(static_cast<size_t>(height * row_bytes))};
  int64_t row = 0;
  for (size_t s = 0; s < offsets.size() && row < height; ++s) {
    const int64_t rows = std::min(rows_per_strip, height - row);
    if (offsets[s] + static_cast<uint64_t>(rows * row_bytes) > size)
      return "TIFF strip " + std::to_string(s) + " is truncated";
    std::memcpy(out.pixels.data() + row * row_bytes, data + offsets[s],
                static_cast<size_t>(rows * row_bytes));
    row += rows;
  }
  if (row < height) return "TIFF strips hold fewer rows than the image";
  return "";
}

// PNG: 8-bit grey or RGB, not interlaced.
inline std::string decode_png(const uint8_t* data, size_t size, DecodedImage& out,
                              bool* unsupported) {
  auto be32 = [&](size_t at) {
    return static_cast<uint32_t>(data[at]) << 24 | static_cast<uint32_t>(data[at + 1]) << 16 |
           static_cast<uint32_t>(data[at + 2]) << 8 | static_cast<uint32_t>(data[at + 3]);
  };
  size_t pos = 8;
  int64_t width = 0, height = 0;
  int depth = 0, color = -1, interlace = 0;
  std::vector<uint8_t> compressed;
  while (pos + 8 <= size) {
    const uint32_t len = be32(pos);
    const std::string type(reinterpret_cast<const char*>(data + pos + 4), 4);
    if (pos + 12 + static_cast<size_t>(len) > size) return "PNG chunk " + type + " is truncated";
    const uint8_t* body = data + pos + 8;
    if (type == "IHDR" && len >= 13) {
      width = be32(pos + 8);
      height = be32(pos + 12);
      depth = body[8];
      color = body[9];
      interlace = body[12];
    } else if (type == "IDAT") {
      compressed.insert(compressed.end(), body, body + len);
    } else if (type == "IEND") {
      break;
    }
    pos += 12 + static_cast<size_t>(len);
  }
  if (color < 0 || width <= 0 || height <= 0 || width > kMaxImageSide || height > kMaxImageSide)
    return "PNG has no valid IHDR";
  if (depth != 8 || (color != 0 && color != 2) || interlace != 0) {
    *unsupported = true;
    return "only 8-bit grey or RGB PNG without interlacing is supported";
  }
  const int64_t channels = color == 2 ? 3 : 1, stride = width * channels;
  std::vector<uint8_t> raw;
  Inflater inflater(compressed.data(), compressed.size());
  std::string err = inflater.zlib(raw);
  if (!err.empty()) return "PNG data: " + err;
  if (static_cast<int64_t>(raw.size()) < height * (stride + 1)) return "PNG data is truncated";
  out = {height, width, channels, std::vector<uint8_t>(static_cast<size_t>(height * stride))};
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t filter = raw[static_cast<size_t>(y * (stride + 1))];
    const uint8_t* src = raw.data() + y * (stride + 1) + 1;
    uint8_t* row = out.pixels.data() + y * stride;
    const uint8_t* up = y > 0 ? row - stride : nullptr;
    for (int64_t x = 0; x < stride; ++x) {
      const int a = x >= channels ? row[x - channels] : 0, b = up ? up[x] : 0,
                c = (up && x >= channels) ? up[x - channels] : 0;
      int pred = 0;
      switch (filter) {
        case 0:
          pred = 0;
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : pb <= pc ? b : c;
          break;
        }
        default:
          return "PNG row filter " + std::to_string(filter) + " is invalid";
      }
      row[x] = static_cast<uint8_t>(src[x] + pred);
    }
  }
  return "";
}

// Returns "" on success, else why the bytes cannot be decoded; *unsupported tells a valid but
// unhandled format (JPEG, PNG, ...) from a malformed file.
inline std::string decode_image(const uint8_t* data, size_t size, DecodedImage& out,
                                bool* unsupported) {
  *unsupported = false;
  auto u32 = [&](size_t at) {
    return static_cast<uint32_t>(data[at]) | static_cast<uint32_t>(data[at + 1]) << 8 |
           static_cast<uint32_t>(data[at + 2]) << 16 | static_cast<uint32_t>(data[at + 3]) << 24;
  };
  auto u16 = [&](size_t at) {
    return static_cast<uint32_t>(data[at]) | static_cast<uint32_t>(data[at + 1]) << 8;
  };
  if (size >= 54 && data[0] == 'B' && data[1] == 'M') {
    const uint32_t offset = u32(10), header = u32(14);
    const auto width = static_cast<int32_t>(u32(18)), height = static_cast<int32_t>(u32(22));
    const uint32_t bpp = u16(28), compression = u32(30);
    if (header < 40 || bpp != 24 || compression != 0) {
      *unsupported = true;
      return "only uncompressed 24-bit BMP is supported (this one has " + std::to_string(bpp) +
             " bits per pixel, compression " + std::to_string(compression) + ")";
    }
    if (width <= 0 || height == 0 || width > kMaxImageSide || height > kMaxImageSide ||
        height < -kMaxImageSide)
      return "BMP has an invalid size";
    const int64_t h = height < 0 ? -static_cast<int64_t>(height) : height, w = width;
    const int64_t stride = (w * 3 + 3) / 4 * 4;
    if (static_cast<int64_t>(offset) + stride * h > static_cast<int64_t>(size))
      return "BMP pixel data is truncated";
    out = {h, w, 3, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
    for (int64_t y = 0; y < h; ++y) {
      const int64_t src_row = height < 0 ? y : h - 1 - y;  // positive height: bottom-up rows
      const uint8_t* src = data + offset + src_row * stride;
      uint8_t* dst = out.pixels.data() + y * w * 3;
      for (int64_t x = 0; x < w; ++x) {
        dst[x * 3 + 0] = src[x * 3 + 2];
        dst[x * 3 + 1] = src[x * 3 + 1];
        dst[x * 3 + 2] = src[x * 3 + 0];
      }
    }
    return "";
  }
  if (size >= 2 && data[0] == 'P' && data[1] >= '2' && data[1] <= '6' && data[1] != '4') {
    const char kind = static_cast<char>(data[1]);
    size_t pos = 2;
    // Reads one header number, skipping whitespace and comments.
    auto number = [&](int64_t& v) {
      for (;;) {
        while (pos < size && std::isspace(data[pos])) ++pos;
        if (pos < size && data[pos] == '#') {
          while (pos < size && data[pos] != '\n') ++pos;
          continue;
        }
        break;
      }
      if (pos >= size || !std::isdigit(data[pos])) return false;
      v = 0;
      while (pos < size && std::isdigit(data[pos]) && v < (int64_t{1} << 40))
        v = v * 10 + (data[pos++] - '0');
      return true;
    };
    int64_t w = 0, h = 0, maxval = 0;
    if (!number(w) || !number(h) || !number(maxval) || w <= 0 || h <= 0 || w > kMaxImageSide ||
        h > kMaxImageSide)
      return "PNM header is malformed";
    if (maxval != 255) {
      *unsupported = true;
      return "only PNM with maxval 255 is supported (this one has " + std::to_string(maxval) + ")";
    }
    const int64_t channels = (kind == '3' || kind == '6') ? 3 : 1;
    const int64_t count = w * h * channels;
    out = {h, w, channels, std::vector<uint8_t>(static_cast<size_t>(count))};
    if (kind == '5' || kind == '6') {
      ++pos;  // the single whitespace after maxval
      if (pos + static_cast<size_t>(count) > size) return "PNM pixel data is truncated";
      std::memcpy(out.pixels.data(), data + pos, static_cast<size_t>(count));
    } else {
      for (int64_t i = 0; i < count; ++i) {
        int64_t v = 0;
        if (!number(v) || v > 255) return "PNM pixel data is malformed";
        out.pixels[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
      }
    }
    return "";
  }
  if (size >= 8 && ((data[0] == 'I' && data[1] == 'I' && data[2] == 42 && data[3] == 0) ||
                    (data[0] == 'M' && data[1] == 'M' && data[2] == 0 && data[3] == 42)))
    return decode_tiff(data, size, out, unsupported);
  static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, png_signature, 8) == 0)
    return decode_png(data, size, out, unsupported);
  *unsupported = true;
  return "the image format is not supported (Quilt decodes BMP, PNM, TIFF and PNG only)";
}

// The output's channel count for a pixel_format.
inline int64_t image_channels(const std::string& pixel_format) {
  return pixel_format == "Grayscale" ? 1 : 3;
}

}  // namespace quilt
