// A small zlib/DEFLATE decoder (RFC 1950/1951) for ImageDecoder's PNG support: stored, fixed and
// dynamic Huffman blocks, decoded bit by bit with canonical code tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace quilt {

class Inflater {
 public:
  Inflater(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // Decodes a zlib stream into out; returns "" or what is wrong.
  std::string zlib(std::vector<uint8_t>& out) {
    if (size_ < 2 || (data_[0] & 0x0f) != 8 || ((data_[0] << 8) | data_[1]) % 31 != 0)
      return "zlib header is invalid";
    if (data_[1] & 0x20) return "zlib preset dictionaries are not supported";
    pos_ = 16;
    for (;;) {
      uint32_t last = 0, type = 0;
      if (!bits(1, last) || !bits(2, type)) return "deflate stream is truncated";
      std::string err;
      if (type == 0)
        err = stored(out);
      else if (type == 1)
        err = fixed(out);
      else if (type == 2)
        err = dynamic(out);
      else
        err = "deflate block type 3 is invalid";
      if (!err.empty()) return err;
      if (last) return "";
    }
  }

 private:
  struct Huffman {
    uint16_t count[16] = {};
    std::vector<uint16_t> symbol;
  };

  bool bits(int n, uint32_t& v) {
    v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= size_ * 8) return false;
      v |= static_cast<uint32_t>((data_[pos_ >> 3] >> (pos_ & 7)) & 1) << i;
      ++pos_;
    }
    return true;
  }

  static bool build(Huffman& h, const uint8_t* lengths, int n) {
    for (auto& c : h.count) c = 0;
    for (int i = 0; i < n; ++i) ++h.count[lengths[i]];
    h.count[0] = 0;
    uint16_t offs[16] = {};
    for (int len = 1; len < 15; ++len)
      offs[len + 1] = static_cast<uint16_t>(offs[len] + h.count[len]);
    h.symbol.assign(static_cast<size_t>(n), 0);
    for (int i = 0; i < n; ++i)
      if (lengths[i]) h.symbol[offs[lengths[i]]++] = static_cast<uint16_t>(i);
    return true;
  }

  // Next symbol of h, or -1 at the end of the data or on an invalid code.
  int decode(const Huffman& h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= 15; ++len) {
      uint32_t b = 0;
      if (!bits(1, b)) return -1;
      code |= static_cast<int>(b);
      const int count = h.count[len];
      if (code - count < first) return h.symbol[static_cast<size_t>(index + (code - first))];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    return -1;
  }

  std::string stored(std::vector<uint8_t>& out) {
    pos_ = (pos_ + 7) & ~size_t{7};
    const size_t at = pos_ / 8;
    if (at + 4 > size_) return "stored block is truncated";
    const uint32_t len = data_[at] | data_[at + 1] << 8, nlen = data_[at + 2] | data_[at + 3] << 8;
    if (len != (~nlen & 0xffff)) return "stored block length check failed";
    if (at + 4 + len > size_) return "stored block is truncated";
    out.insert(out.end(), data_ + at + 4, data_ + at + 4 + len);
    pos_ = (at + 4 + len) * 8;
    return "";
  }

  std::string codes(std::vector<uint8_t>& out, const Huffman& lit, const Huffman& dist) {
    static const uint16_t len_base[] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                        15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                        67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const uint8_t len_extra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                        2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static const uint16_t dist_base[] = {
        1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
        193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static const uint8_t dist_extra[] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                         6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    for (;;) {
      const int sym = decode(lit);
      if (sym < 0) return "deflate code is invalid or truncated";
      if (sym < 256) {
        out.push_back(static_cast<uint8_t>(sym));
        continue;
      }
      if (sym == 256) return "";
      const int li = sym - 257;
      if (li >= 29) return "deflate length code is invalid";
      uint32_t extra = 0;
      if (!bits(len_extra[li], extra)) return "deflate stream is truncated";
      const size_t len = len_base[li] + extra;
      const int ds = decode(dist);
      if (ds < 0 || ds >= 30) return "deflate distance code is invalid";
      if (!bits(dist_extra[ds], extra)) return "deflate stream is truncated";
      const size_t d = dist_base[ds] + extra;
      if (d > out.size()) return "deflate distance reaches before the start";
      for (size_t i = 0; i < len; ++i) out.push_back(out[out.size() - d]);
    }
  }

  std::string fixed(std::vector<uint8_t>& out) {
    uint8_t lengths[320];
    int i = 0;
    for (; i < 144; ++i) lengths[i] = 8;
    for (; i < 256; ++i) lengths[i] = 9;
    for (; i < 280; ++i) lengths[i] = 7;
    for (; i < 288; ++i) lengths[i] = 8;
    Huffman lit, dist;
    build(lit, lengths, 288);
    for (i = 0; i < 30; ++i) lengths[i] = 5;
    build(dist, lengths, 30);
    return codes(out, lit, dist);
  }

  std::string dynamic(std::vector<uint8_t>& out) {
    static const uint8_t order[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                      11, 4,  12, 3, 13, 2, 14, 1, 15};
    uint32_t hlit = 0, hdist = 0, hclen = 0;
    if (!bits(5, hlit) || !bits(5, hdist) || !bits(4, hclen)) return "deflate stream is truncated";
    const int nlen = static_cast<int>(hlit) + 257, ndist = static_cast<int>(hdist) + 1;
    if (nlen > 286 || ndist > 30) return "deflate code counts are invalid";
    uint8_t lengths[320] = {};
    for (uint32_t i = 0; i < hclen + 4; ++i) {
      uint32_t v = 0;
      if (!bits(3, v)) return "deflate stream is truncated";
      lengths[order[i]] = static_cast<uint8_t>(v);
    }
    Huffman lencode;
    build(lencode, lengths, 19);
    int index = 0;
    while (index < nlen + ndist) {
      const int sym = decode(lencode);
      if (sym < 0) return "deflate code length code is invalid";
      if (sym < 16) {
        lengths[index++] = static_cast<uint8_t>(sym);
        continue;
      }
      uint8_t value = 0;
      uint32_t repeat = 0;
      if (sym == 16) {
        if (index == 0) return "deflate repeat has no previous length";
        value = lengths[index - 1];
        if (!bits(2, repeat)) return "deflate stream is truncated";
        repeat += 3;
      } else if (sym == 17) {
        if (!bits(3, repeat)) return "deflate stream is truncated";
        repeat += 3;
      } else {
        if (!bits(7, repeat)) return "deflate stream is truncated";
        repeat += 11;
      }
      if (index + static_cast<int>(repeat) > nlen + ndist) return "deflate lengths overflow";
      while (repeat--) lengths[index++] = value;
    }
    Huffman lit, dist;
    build(lit, lengths, nlen);
    build(dist, lengths + nlen, ndist);
    return codes(out, lit, dist);
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;  // in bits
};

}  // namespace quilt
