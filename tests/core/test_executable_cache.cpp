// The executable cache from inside: the content hash, and entries whose header and checksum are
// right but whose payload is not what the backend wrote (a damaged file that passed the
// checksum, another build of the plugin): the OpenCL plugin's executable_deserialize must refuse
// each with a status naming what is wrong, and the host must warn, compile and replace the entry.
// The cross-process behaviour and the damaged files the host itself catches are tested by
// tests/cli/test_executable_cache.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "core/executable_cache.hpp"
#include "quilt/quilt.hpp"
#include "tests/tensor_testing.hpp"

namespace quilt {
namespace {

namespace fs = std::filesystem;

TEST(ExecutableCache, ContentHashSeesEveryByteAndTheLength) {
  std::vector<unsigned char> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  const quilt_hash128_t h = content_hash(bytes.data(), bytes.size());
  const quilt_hash128_t again = content_hash(bytes.data(), bytes.size());
  EXPECT_TRUE(h.lo == again.lo && h.hi == again.hi);
  for (size_t at : {size_t{0}, size_t{63}, size_t{64}, size_t{500}, size_t{999}}) {
    auto changed = bytes;
    changed[at] ^= 1;
    const quilt_hash128_t c = content_hash(changed.data(), changed.size());
    EXPECT_FALSE(c.lo == h.lo && c.hi == h.hi) << "byte " << at;
  }
  // A trailing zero byte is not the same content.
  auto longer = bytes;
  longer.push_back(0);
  const quilt_hash128_t l = content_hash(longer.data(), longer.size());
  EXPECT_FALSE(l.lo == h.lo && l.hi == h.hi);
  EXPECT_EQ(hex128({0x1, 0x2}), "00000000000000020000000000000001");
}

// The cache hashes an entry as the backend writes it, in pieces of any sizes: the same
// checksum as the whole payload's, which the loader computes.
TEST(ExecutableCache, ContentHashInPiecesIsTheWholeHash) {
  std::vector<unsigned char> bytes(10000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t total :
       {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4097}, bytes.size()}) {
    for (size_t piece : {size_t{1}, size_t{7}, size_t{64}, size_t{100}, size_t{5000}}) {
      SCOPED_TRACE(std::to_string(total) + " bytes in pieces of " + std::to_string(piece));
      ContentHasher h(0x51c7a9e3u);
      for (size_t at = 0; at < total; at += piece)
        h.update(bytes.data() + at, std::min(piece, total - at));
      const quilt_hash128_t whole = content_hash(bytes.data(), total, 0x51c7a9e3u);
      const quilt_hash128_t pieces = h.finish();
      EXPECT_TRUE(whole.lo == pieces.lo && whole.hi == pieces.hi);
    }
  }
}

#ifdef QUILT_OPENCL_PLUGIN_PATH
const std::string kModel = std::string(QUILT_TEST_MODELS_DIR) + "/hetero_mlp.onnx";

SessionOptions opencl_options(const fs::path& cache) {
  SessionOptions o;
  o.threads = 2;
  o.plugins = {QUILT_OPENCL_PLUGIN_PATH};
  o.backends = {"opencl", "cpu"};
  o.partition_cost_rule = false;
  o.cache_dir = cache.string();
  return o;
}

bool have_opencl_device() {
  for (const auto& b : list_backends({QUILT_OPENCL_PLUGIN_PATH}).backends)
    if (b.name == "opencl" && !b.devices.empty()) return true;
  return false;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Rewrites the entry with this payload and a header that matches it (size, checksum).
void write_with_checksum(const fs::path& p, const std::string& header, const std::string& payload) {
  std::string h = header;
  const uint64_t size = payload.size();
  const quilt_hash128_t sum = content_hash(payload.data(), payload.size());
  std::memcpy(h.data() + 32, &size, sizeof size);
  std::memcpy(h.data() + 40, &sum, sizeof sum);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << h << payload;
}

TEST(ExecutableCache, OpenClRefusesPayloadsThatPassTheChecksumButDoNotFit) {
  if (!have_opencl_device()) GTEST_SKIP() << "no OpenCL device";
  const fs::path cache = fs::path(QUILT_TEST_WORK_DIR) / "executable_cache";
  fs::remove_all(cache);
  Tensor x = testing::random_input({8, 64}, 3);
  TensorMap want;
  {
    Session first(kModel, opencl_options(cache));
    ASSERT_EQ(first.plan().patches.size(), 1u) << first.plan().to_text();
    EXPECT_EQ(first.plan().patches[0].cache, "stored") << first.plan().patches[0].cache_detail;
    want = first.run({{"x", x}});
  }
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(cache)) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  const fs::path entry = entries[0];
  const std::string good = read_file(entry);
  ASSERT_GT(good.size(), 4096u + 64);
  const std::string header = good.substr(0, 4096), payload = good.substr(4096);

  std::mutex mutex;
  std::vector<std::string> warnings;
  set_log_sink([&](LogLevel level, const std::string& m) {
    std::lock_guard lock(mutex);
    if (level == LogLevel::Warning) warnings.push_back(m);
    return true;
  });
  ASSERT_EQ(payload.rfind("QCLEXE01", 0), 0u) << "the OpenCL payload starts with its magic";
  // The index: magic, u32 engine, u32 programs, u32 constants, u32 0, then the first program's
  // name length (at 24), which is made huge.
  std::string bad_offset = payload;
  std::memset(bad_offset.data() + 24, 0x7f, 4);
  struct Case {
    const char* name;
    std::string payload;
    const char* says;
  };
  std::string no_magic = payload;
  no_magic[0] = 'X';
  std::string unknown_engine = payload;
  unknown_engine[8] = 9;
  const std::vector<Case> cases = {
      {"no magic", no_magic, "not the OpenCL backend's"},
      {"unknown GEMM engine", unknown_engine, "unknown GEMM engine 9"},
      {"index cut short", payload.substr(0, 40), "truncated or inconsistent index"},
      {"a name longer than the entry", bad_offset, "truncated or inconsistent index"},
      {"data cut off", payload.substr(0, payload.size() - 100), "truncated or inconsistent index"},
      {"magic alone", payload.substr(0, 8), "truncated or inconsistent index"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    write_with_checksum(entry, header, c.payload);
    warnings.clear();
    Session again(kModel, opencl_options(cache));
    const auto& p = again.plan().patches[0];
    EXPECT_EQ(p.cache, "stored");
    EXPECT_NE(p.cache_detail.find("the backend refused it"), std::string::npos) << p.cache_detail;
    EXPECT_NE(p.cache_detail.find(c.says), std::string::npos) << p.cache_detail;
    {
      std::lock_guard lock(mutex);
      ASSERT_EQ(warnings.size(), 1u);
      EXPECT_NE(warnings[0].find(entry.string()), std::string::npos) << warnings[0];
      EXPECT_NE(warnings[0].find(c.says), std::string::npos) << warnings[0];
    }
    auto got = again.run({{"x", x}});
    for (const auto& [name, t] : want) testing::expect_close(got.at(name), t);
    // Replaced by a good entry: the next session loads it.
    Session loads(kModel, opencl_options(cache));
    EXPECT_EQ(loads.plan().patches[0].cache, "loaded") << loads.plan().patches[0].cache_detail;
  }
  set_log_sink(nullptr);
}
#endif

}  // namespace
}  // namespace quilt
