// Fuzzer 2: fuzzer 1, then one run of the session on small generated inputs: every symbolic or
// unknown dim is 2, an unknown rank is [2], and inputs of more than 4,096 elements in all are
// not run. The memory cap is the sanitizer's: tools/fuzz.sh sets ASan's max_allocation_size_mb
// (a larger allocation fails, which Quilt reports as OutOfMemory) and libFuzzer's -rss_limit_mb.
#include <cstring>

#include "tests/fuzz/fuzz_common.hpp"

namespace {

template <class T>
void fill(quilt::Tensor& t, T (*value)(int64_t)) {
  T* p = static_cast<T*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = value(i);
}

quilt::Tensor make_input(const quilt::ValueInfo& info, int64_t* elements) {
  std::vector<int64_t> shape;
  if (!info.has_shape) shape = {2};
  for (const auto& d : info.shape) shape.push_back(d.is_fixed() ? d.value : 2);
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d > 4096 || (n *= d) > 4096) n = 1 << 20;  // too big: not run
  }
  *elements += n;
  if (*elements > 4096 || !quilt::dtype_supported(info.dtype)) return {};
  quilt::Tensor t(info.dtype, shape);
  using quilt::DType;
  switch (info.dtype) {
    case DType::Float32:
      fill<float>(t, [](int64_t i) { return 0.5f * float(i % 7 - 3); });
      break;
    case DType::Float64:
      fill<double>(t, [](int64_t i) { return 0.25 * double(i % 9 - 4); });
      break;
    case DType::Int64:
      fill<int64_t>(t, [](int64_t i) { return i % 5; });
      break;
    case DType::Int32:
      fill<int32_t>(t, [](int64_t i) { return int32_t(i % 5); });
      break;
    case DType::Int8:
      fill<int8_t>(t, [](int64_t i) { return int8_t(i % 5 - 2); });
      break;
    case DType::UInt8:
      fill<uint8_t>(t, [](int64_t i) { return uint8_t(i % 5); });
      break;
    case DType::Bool:
      fill<bool>(t, [](int64_t i) { return i % 2 == 1; });
      break;
    default:
      break;  // zeros
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  quilt::fuzz::expect_only_quilt_errors([&] {
    quilt::Session s = quilt::Session::from_bytes(quilt::fuzz::bytes(data, size),
                                                  quilt::fuzz::quiet_cpu_options());
    quilt::TensorMap inputs;
    int64_t elements = 0;
    for (const auto& info : s.inputs()) {
      quilt::Tensor t = make_input(info, &elements);
      if (elements > 4096 || !quilt::dtype_supported(info.dtype)) return;  // not run
      inputs[info.name] = t;
    }
    (void)s.run(inputs);
  });
  return 0;
}
