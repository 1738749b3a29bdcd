// ImageDecoder's decoding, shared by shape inference (the output shape is in the image header)
// and the CPU kernel. Handles uncompressed 24-bit BMP and 8-bit PNM (P2, P3, P5, P6); any
// other format is reported as not implemented.
#pragma once

#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace quilt {

struct DecodedImage {
  int64_t height = 0, width = 0, channels = 0;  // channels: 3 (RGB) or 1 (grey)
  std::vector<uint8_t> pixels;                  // row-major H x W x channels
};

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
    if (width <= 0 || height == 0) return "BMP has an invalid size";
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
    if (!number(w) || !number(h) || !number(maxval) || w <= 0 || h <= 0)
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
  *unsupported = true;
  return "the image format is not supported (Quilt decodes uncompressed BMP and PNM only)";
}

// The output's channel count for a pixel_format.
inline int64_t image_channels(const std::string& pixel_format) {
  return pixel_format == "Grayscale" ? 1 : 3;
}

}  // namespace quilt
