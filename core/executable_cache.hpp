// The executable cache (SessionOptions::cache_dir): compiled patches kept on disk between
// processes, through a backend's optional executable_serialize / executable_deserialize slots.
//
// An entry is <cache_dir>/<backend>-<key>.qexe: a 4096-byte header (magic, format, the key,
// the payload's size and 128-bit checksum, a line saying what it is), then the backend's bytes,
// which therefore start on a page boundary. The key is a hash of everything compile's result
// depends on (see cache_key). Entries are written to a temporary file and renamed, so a reader
// sees a whole entry or none; a missing, truncated, corrupt or foreign entry is recompiled and
// overwritten, with a warning for the damaged ones.
#pragma once

#include <string>

#include "core/device.hpp"
#include "core/log.hpp"

namespace quilt {

// A 128-bit hash of bytes (not cryptographic), the same in every process of one Quilt version.
quilt_hash128_t content_hash(const void* data, size_t bytes, uint64_t seed = 0);

// content_hash of bytes given in pieces of any sizes: the same hash as content_hash of their
// concatenation, without holding it (the cache's entries are hashed as they are written).
class ContentHasher {
 public:
  explicit ContentHasher(uint64_t seed = 0);
  void update(const void* data, size_t bytes);
  quilt_hash128_t finish() const;

 private:
  uint64_t acc_[4];
  uint64_t total_ = 0;
  unsigned char pending_[64];
  size_t pending_bytes_ = 0;
};
std::string hex128(quilt_hash128_t h);

// What the cache did for one patch (PlanReport::Patch::cache / cache_detail).
struct CacheOutcome {
  std::string what;    // "loaded", "stored", "compiled"; "" without a cache directory
  std::string detail;  // the entry's path, or why nothing was stored or loaded
};

// The hash that names a patch's entry: the graph (values' dtypes and dims, constants by content
// hash, nodes, attributes, inputs, outputs), the backend (name, version, ABI version), the
// device (name, flags, properties but launch_ns) and its device_open options. The graph's
// constant hashes must have been computed (AbiGraph::compute_constant_hashes).
quilt_hash128_t cache_key(const Device& device, AbiGraph& graph);

// Compiles `graph` on `device`, through the cache in cache_dir when it is not empty and the
// backend has both slots: loads the entry when there is a valid one, else compiles and stores.
// `where` prefixes compile errors. Failures of the cache itself never fail the compile: they
// are logged as warnings and said in *outcome.
std::shared_ptr<Executable> compile_cached(const Device& device, AbiGraph& graph,
                                           const std::string& where, const std::string& cache_dir,
                                           const Logger& logger, CacheOutcome* outcome);

}  // namespace quilt
