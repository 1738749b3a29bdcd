// A minimal protobuf wire-format walker: just enough of ModelProto -> GraphProto -> TensorProto
// to lift the initializers' raw_data out. Every other field is re-encoded as it was read.
#include "core/onnx_wire.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "quilt/quilt.hpp"

namespace quilt {

WireReader::WireReader(std::span<const std::byte> bytes)
    : data_(bytes.data()), size_(bytes.size()), end_(bytes.size()) {}

WireReader::WireReader(int fd, uint64_t size, std::string name)
    : size_(size), fd_(fd), name_(std::move(name)), buffer_(size_t{1} << 18) {}

bool WireReader::byte(uint8_t& b) {
  if (pos_ >= size_) return false;
  if (pos_ < begin_ || pos_ >= end_) refill();
  b = static_cast<uint8_t>(data_[pos_ - begin_]);
  ++pos_;
  return true;
}

bool WireReader::varint(uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t b = 0;
    if (!byte(b)) return false;
    v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

bool WireReader::append(uint64_t n, std::string& out) {
  if (n > size_ - pos_) return false;
  while (n) {
    if (pos_ < begin_ || pos_ >= end_) refill();
    const uint64_t k = std::min(n, end_ - pos_);
    out.append(reinterpret_cast<const char*>(data_ + (pos_ - begin_)), k);
    pos_ += k;
    n -= k;
  }
  return true;
}

bool WireReader::skip(uint64_t n) {
  if (n > size_ - pos_) return false;
  pos_ += n;
  return true;
}

void WireReader::refill() {
  // In memory the window is everything, so only a file gets here.
  const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer_.size(), size_ - pos_));
  size_t got = 0;
  while (got < want) {
    const ssize_t n = pread(fd_, buffer_.data() + got, want - got, static_cast<off_t>(pos_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(ErrorCode::Io, "error reading model file '" + name_ +
                                     "': " + (n < 0 ? std::strerror(errno) : "file shrank"));
    got += static_cast<size_t>(n);
  }
  data_ = buffer_.data();
  begin_ = pos_;
  end_ = pos_ + got;
}

namespace {

// Field numbers from onnx.proto.
constexpr uint32_t kModelGraph = 7;        // ModelProto.graph
constexpr uint32_t kGraphInitializer = 5;  // GraphProto.initializer
constexpr uint32_t kTensorRawData = 9;     // TensorProto.raw_data
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
constexpr uint64_t kMaxFieldNumber = (uint64_t{1} << 29) - 1;

void write_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// A field's header: for a length-delimited one, the payload's size; the reader is then at the
// payload (or past the value, for the other wire types, which `copy` re-encodes).
struct Field {
  uint32_t number = 0;
  int wire = 0;
  uint64_t value = 0;  // varint value, or payload size
};

// Reads a field header of a message ending at `end`.
bool next_field(WireReader& r, uint64_t end, Field& f) {
  uint64_t tag = 0;
  if (!r.varint(tag) || (tag >> 3) == 0 || (tag >> 3) > kMaxFieldNumber) return false;
  f.number = static_cast<uint32_t>(tag >> 3);
  f.wire = static_cast<int>(tag & 7);
  switch (f.wire) {
    case kVarint:
    case kLengthDelimited:
      if (!r.varint(f.value)) return false;
      break;
    case kFixed64:
    case kFixed32:
      break;
    default:
      return false;  // groups (deprecated, never in ONNX) and invalid wire types
  }
  if (r.offset() > end) return false;
  return f.wire != kLengthDelimited || f.value <= end - r.offset();
}

// Re-encodes the field whose header was just read, with its value, into out.
bool copy(WireReader& r, uint64_t end, const Field& f, std::string& out) {
  write_varint(out, (uint64_t{f.number} << 3) | static_cast<uint64_t>(f.wire));
  switch (f.wire) {
    case kVarint:
      write_varint(out, f.value);
      return true;
    case kLengthDelimited:
      write_varint(out, f.value);
      return r.append(f.value, out);
    default: {
      const uint64_t n = f.wire == kFixed64 ? 8 : 4;
      return n <= end - r.offset() && r.append(n, out);
    }
  }
}

bool split_tensor(WireReader& r, uint64_t end, SplitTensor& t) {
  Field f;
  while (r.offset() < end) {
    if (!next_field(r, end, f)) return false;
    if (f.number == kTensorRawData && f.wire == kLengthDelimited) {
      t.has_raw = true;
      t.raw_offset = r.offset();
      t.raw_size = f.value;
      if (!r.skip(f.value)) return false;
    } else if (!copy(r, end, f, t.proto)) {
      return false;
    }
  }
  return true;
}

bool split_graph(WireReader& r, uint64_t end, std::string& graph, SplitModel& out) {
  Field f;
  while (r.offset() < end) {
    if (!next_field(r, end, f)) return false;
    if (f.number == kGraphInitializer && f.wire == kLengthDelimited) {
      SplitTensor t;
      if (!split_tensor(r, r.offset() + f.value, t)) return false;
      out.initializers.push_back(std::move(t));
    } else if (!copy(r, end, f, graph)) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<SplitModel> split_model(WireReader& r) {
  SplitModel out;
  // Protobuf merges repeated occurrences of a message field, which for the wire format is the
  // same as concatenating their payloads: every graph field's rest goes into one.
  std::string graph;
  bool has_graph = false;
  Field f;
  const uint64_t end = r.size();
  while (r.offset() < end) {
    if (!next_field(r, end, f)) return std::nullopt;
    if (f.number == kModelGraph && f.wire == kLengthDelimited) {
      if (!split_graph(r, r.offset() + f.value, graph, out)) return std::nullopt;
      has_graph = true;
    } else if (!copy(r, end, f, out.model)) {
      return std::nullopt;
    }
  }
  if (has_graph) {
    write_varint(out.model, (uint64_t{kModelGraph} << 3) | kLengthDelimited);
    write_varint(out.model, graph.size());
    out.model += graph;
  }
  return out;
}

}  // namespace quilt
