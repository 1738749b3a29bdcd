// libFuzzer's custom mutator and crossover for the model fuzzers (fuzz_model, fuzz_run,
// fuzz_plugin): the structure-aware ModelProto mutator of model_mutator.hpp, with libFuzzer's
// own byte-level mutation as its fallback. QUILT_FUZZ_BYTES_ONLY=1 in the environment leaves
// every mutation to libFuzzer's byte-level mutators (to compare the two; tools/fuzz.sh).
#include <cstdlib>

#include "tests/fuzz/model_mutator.hpp"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {
const bool bytes_only = [] {
  const char* v = std::getenv("QUILT_FUZZ_BYTES_ONLY");
  return v && *v && *v != '0';
}();
}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  if (bytes_only) return LLVMFuzzerMutate(data, size, max_size);
  return quilt::fuzz::mutate_model(data, size, max_size, seed, LLVMFuzzerMutate);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  if (bytes_only) return 0;
  return quilt::fuzz::cross_over_models(data1, size1, data2, size2, out, max_out_size, seed);
}
