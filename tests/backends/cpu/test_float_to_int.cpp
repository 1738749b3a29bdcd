// Float -> integer conversions whose C++ static_cast is undefined (NaN, infinities, values out of
// the target's range) give x86's defined answer (backends/cpu/kernels/float_to_int.hpp), checked
// through sessions on Pow with an int32 base and a float exponent (what fuzz_run found: 0^-1.5 is
// inf, converted to int32) and Cast from float to every integer type. Under UBSan (the fuzz and
// sanitizer builds) the old conversion failed these runs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backends/cpu/kernels/float_to_int.hpp"
#include "quilt/quilt.hpp"

using namespace quilt;

namespace {

const std::string kDir = QUILT_TEST_MODELS_DIR;
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();

template <class T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

}  // namespace

TEST(FloatToInt, PowOfAnIntBaseAndAFloatExponentOutOfRange) {
  Session s(kDir + "/pow_int_float.onnx");
  const Tensor x = Tensor::from_vector<int32_t>({4}, {0, 2, 3, -2});
  const Tensor e = Tensor::from_vector<float>({4}, {-1.5f, 40.f, 2.f, 0.5f});
  // inf, 2^40 and NaN have no int32 value: the minimum, like x86's conversion.
  EXPECT_EQ(values<int32_t>(s.run({{"x", x}, {"e", e}}).at("y")),
            (std::vector<int32_t>{kMin32, kMin32, 9, kMin32}));
}

TEST(FloatToInt, CastOfNanInfinitiesAndOutOfRangeValuesToEveryIntegerType) {
  Session s(kDir + "/cast_float_to_ints.onnx");
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector<float>(
      {8}, {std::nanf(""), inf, -inf, 1e10f, -3.7f, 300.9f, 70000.f, 1e19f});
  const TensorMap y = s.run({{"x", x}});
  // 32 bits and narrower: through int32 (INT32_MIN when out of its range), then the low bits.
  EXPECT_EQ(values<int8_t>(y.at("i8")), (std::vector<int8_t>{0, 0, 0, 0, -3, 44, 112, 0}));
  EXPECT_EQ(values<uint8_t>(y.at("u8")), (std::vector<uint8_t>{0, 0, 0, 0, 253, 44, 112, 0}));
  EXPECT_EQ(values<int16_t>(y.at("i16")), (std::vector<int16_t>{0, 0, 0, 0, -3, 300, 4464, 0}));
  EXPECT_EQ(values<uint16_t>(y.at("u16")),
            (std::vector<uint16_t>{0, 0, 0, 0, 65533, 300, 4464, 0}));
  EXPECT_EQ(values<int32_t>(y.at("i32")),
            (std::vector<int32_t>{kMin32, kMin32, kMin32, kMin32, -3, 300, 70000, kMin32}));
  // uint32: the low 32 bits of the int64 conversion.
  EXPECT_EQ(values<uint32_t>(y.at("u32")),
            (std::vector<uint32_t>{0, 0, 0, 1410065408u, 4294967293u, 300, 70000, 0}));
  EXPECT_EQ(values<int64_t>(y.at("i64")),
            (std::vector<int64_t>{kMin64, kMin64, kMin64, 10000000000, -3, 300, 70000, kMin64}));
  // uint64: from 2^63 on, v - 2^63 with the top bit set (1e19f is 9999999980506447872).
  EXPECT_EQ(values<uint64_t>(y.at("u64")),
            (std::vector<uint64_t>{0, 0, uint64_t{1} << 63, 10000000000u, 18446744073709551613u,
                                   300, 70000, 9999999980506447872u}));
}

TEST(FloatToInt, InRangeValuesTruncateTowardZeroLikeStaticCast) {
  using cpu::float_to_int;
  for (double v : {-2147483648.9, -2.5, -0.5, 0.0, 0.9, 2147483647.9}) {
    EXPECT_EQ(float_to_int<int32_t>(v), static_cast<int32_t>(v)) << v;
    EXPECT_EQ(float_to_int<int64_t>(v), static_cast<int64_t>(v)) << v;
  }
  EXPECT_EQ(float_to_int<int32_t>(2147483648.0), kMin32);
  EXPECT_EQ(float_to_int<int64_t>(9223372036854775808.0), kMin64);
  EXPECT_EQ(float_to_int<int64_t>(-9223372036854775808.0), kMin64);
  EXPECT_EQ(float_to_int<uint64_t>(18446744073709549568.0), 18446744073709549568u);
}
