// Splits a serialized ModelProto into a small skeleton and the byte ranges of its weights, so
// that the importer copies each weight once, from the file straight into its tensor, instead of
// holding the file, protobuf's copy of every raw_data and the tensors all at once.
//
//   WireReader reader(fd, file_size, path);       // or WireReader(bytes) for a model in memory
//   auto split = split_model(reader);  // nullopt: let protobuf parse (and judge) the whole file
//   model_proto.ParseFromString(split->model);  // the graph without its initializers
//   tensor_proto.ParseFromString(split->initializers[i].proto);  // without raw_data
//   then read split->initializers[i].raw_size bytes at raw_offset into the tensor
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace quilt {

// Reads a serialized message front to back: from memory, or from a file through a buffer (the
// weights it skips are never read, so they never sit in this process's memory twice).
class WireReader {
 public:
  explicit WireReader(std::span<const std::byte> bytes);
  // name is for messages. Throws Error(Io), naming it, when the file cannot be read.
  WireReader(int fd, uint64_t size, std::string name);

  uint64_t size() const { return size_; }
  uint64_t offset() const { return pos_; }
  // Each returns false, reading nothing more, where the bytes end first.
  bool varint(uint64_t& v);
  bool append(uint64_t n, std::string& out);  // the next n bytes
  bool skip(uint64_t n);

 private:
  bool byte(uint8_t& b);
  void refill();  // makes the buffer start at pos_

  const std::byte* data_ = nullptr;  // the bytes of [begin_, end_)
  uint64_t size_ = 0, pos_ = 0, begin_ = 0, end_ = 0;
  int fd_ = -1;
  std::string name_;
  std::vector<std::byte> buffer_;
};

// A TensorProto of the model graph's initializer list, taken out of the graph.
struct SplitTensor {
  std::string proto;        // the serialized TensorProto without its raw_data field
  bool has_raw = false;     // whether it had raw_data (the last one wins, as in protobuf)
  uint64_t raw_offset = 0;  // raw_data's payload: raw_size bytes at raw_offset of the model
  uint64_t raw_size = 0;
};

struct SplitModel {
  // The ModelProto with every graph field merged into one, minus the graph's initializers. It
  // parses to what protobuf would make of the whole file, initializers aside.
  std::string model;
  std::vector<SplitTensor> initializers;  // the graph's, in file order
};

// nullopt when the bytes are not wire format this splitter walks (malformed, groups): the
// caller then parses the whole model with protobuf, which accepts or reports it exactly as it
// would have without the split. Throws Error(Io) when the reader cannot read its file.
std::optional<SplitModel> split_model(WireReader& reader);

}  // namespace quilt
