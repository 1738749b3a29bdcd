// Fuzzer 3: .npy reading (tools/quilt/npy.cpp, what `quilt run` reads inputs with). The bytes
// go through a file (read_npy takes a path) in $TMPDIR, one per process.
#include <unistd.h>

#include <string>

#include "tests/fuzz/fuzz_common.hpp"
#include "tools/quilt/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/quilt-fuzz-npy-" + std::to_string(getpid()) +
           ".npy";
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  quilt::fuzz::expect_only_quilt_errors([&] {
    quilt::Tensor t = quilt::cli::read_npy(path);
    // Touch every byte the tensor claims to hold (ASan checks each read).
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    unsigned sum = 0;
    for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
    if (sum == 0xdeadbeef) std::fprintf(stderr, "%u\n", sum);  // keeps the loop
  });
  return 0;
}
