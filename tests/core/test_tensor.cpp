#include <gtest/gtest.h>

#include <cmath>

#include "core/float8.hpp"
#include "core/half.hpp"
#include "core/int4.hpp"
#include "quilt/quilt.hpp"
#include "tests/expect_error.hpp"

using namespace quilt;
using quilt::testing::expect_error;

TEST(Tensor, AllocatesZeroedStorageOfTheRightSize) {
  Tensor t(DType::Float32, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.rank(), 2);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<float>()[i], 0.f);
  Tensor scalar(DType::Int64, {});
  EXPECT_EQ(scalar.numel(), 1);
  Tensor empty(DType::Float32, {0, 5});
  EXPECT_EQ(empty.numel(), 0);
}

TEST(Tensor, EveryDTypeHasASizeAndName) {
  for (DType d :
       {DType::Float32, DType::Float16, DType::Float64, DType::Int8, DType::Int16, DType::Int32,
        DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64, DType::Bool}) {
    EXPECT_GT(dtype_size(d), 0u) << dtype_name(d);
    EXPECT_STRNE(dtype_name(d), "undefined");
    Tensor t(d, {3});
    EXPECT_EQ(t.nbytes(), 3 * dtype_size(d));
  }
  EXPECT_TRUE(dtype_supported(DType::String));
  EXPECT_EQ(dtype_size(DType::String), 0u);
  EXPECT_FALSE(dtype_supported(DType::Undefined));
}

TEST(Tensor, StringTensorsHoldStdStringsAndCloneDeeply) {
  Tensor t(DType::String, {2, 2});
  EXPECT_EQ(t.numel(), 4);
  EXPECT_EQ(t.nbytes(), 0u);  // never copied as bytes
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.data<std::string>()[i], "");
  Tensor s = Tensor::from_strings({3}, {"a", "", std::string(1000, 'x')});
  EXPECT_EQ(s.dtype(), DType::String);
  EXPECT_EQ(s.data<std::string>()[2].size(), 1000u);
  Tensor copy = s.clone();
  EXPECT_FALSE(copy.shares_storage_with(s));
  copy.data<std::string>()[0] = "changed";
  EXPECT_EQ(s.data<std::string>()[0], "a");
  Tensor view = s.reshaped({1, 3});
  EXPECT_TRUE(view.shares_storage_with(s));
  EXPECT_EQ(view.data<std::string>()[2], s.data<std::string>()[2]);
  expect_error([&] { s.data<float>(); }, ErrorCode::InvalidArgument,
               {"tensor holds string but was accessed as float32"});
  expect_error([&] { Tensor::from_strings({2}, {"only one"}); }, ErrorCode::InvalidArgument,
               {"shape has 2 elements but 1 values given"});
  std::string text = "x";
  expect_error([&] { Tensor::wrap(DType::String, {1}, &text); }, ErrorCode::InvalidArgument,
               {"a string tensor owns its std::string elements"});
}

TEST(Tensor, FourBitTypesArePackedTwoPerByte) {
  for (DType d : {DType::Int4, DType::UInt4}) {
    EXPECT_TRUE(dtype_supported(d)) << dtype_name(d);
    EXPECT_EQ(dtype_size(d), 0u);  // less than a byte
    EXPECT_EQ(dtype_nbytes(d, 0), 0u);
    EXPECT_EQ(dtype_nbytes(d, 5), 3u);
    EXPECT_EQ(dtype_nbytes(d, 6), 3u);
    Tensor t(d, {3, 3});
    EXPECT_EQ(t.nbytes(), 5u);
    EXPECT_EQ(t.numel(), 9);
    EXPECT_EQ(t.data<uint8_t>()[4], 0);  // the packed bytes, zeroed
    EXPECT_THROW(t.data<int8_t>(), Error);
  }
  EXPECT_STREQ(dtype_name(DType::Int4), "int4");
  EXPECT_STREQ(dtype_name(DType::UInt4), "uint4");
  // element 2k in the low nibble of byte k; int4 sign-extends
  uint8_t packed[2] = {0x8F, 0x07};
  EXPECT_EQ(int4_get(packed, 0, true), -1);
  EXPECT_EQ(int4_get(packed, 1, true), -8);
  EXPECT_EQ(int4_get(packed, 1, false), 8);
  EXPECT_EQ(int4_get(packed, 2, true), 7);
  int4_set(packed, 3, -2);
  EXPECT_EQ(packed[1], 0xE7);
  EXPECT_EQ(int4_get(packed, 3, true), -2);
}

TEST(Tensor, TwoBitTypesArePackedFourPerByteAndFloat4TwoPerByte) {
  for (DType d : {DType::Int2, DType::UInt2}) {
    EXPECT_TRUE(dtype_supported(d)) << dtype_name(d);
    EXPECT_EQ(dtype_size(d), 0u);
    EXPECT_EQ(dtype_packed_bits(d), 2);
    EXPECT_EQ(dtype_nbytes(d, 0), 0u);
    EXPECT_EQ(dtype_nbytes(d, 4), 1u);
    EXPECT_EQ(dtype_nbytes(d, 5), 2u);
    EXPECT_EQ(dtype_nbytes(d, 9), 3u);
    Tensor t(d, {3, 3});
    EXPECT_EQ(t.nbytes(), 3u);
    EXPECT_EQ(t.data<uint8_t>()[2], 0);
    EXPECT_THROW(t.data<int8_t>(), Error);
  }
  EXPECT_EQ(dtype_packed_bits(DType::Float4E2M1), 4);
  EXPECT_EQ(dtype_nbytes(DType::Float4E2M1, 5), 3u);
  EXPECT_EQ(dtype_size(DType::Float8E8M0), 1u);
  EXPECT_EQ(dtype_packed_bits(DType::Float8E8M0), 0);
  EXPECT_STREQ(dtype_name(DType::Int2), "int2");
  EXPECT_STREQ(dtype_name(DType::UInt2), "uint2");
  EXPECT_STREQ(dtype_name(DType::Float4E2M1), "float4e2m1");
  EXPECT_STREQ(dtype_name(DType::Float8E8M0), "float8e8m0");
  // element 4k + j in bits 2j, 2j + 1 of byte k; int2 sign-extends
  uint8_t packed[2] = {0xE4, 0x03};  // 0, 1, 2, 3 | 3
  EXPECT_EQ(packed_int_get(packed, 0, DType::Int2), 0);
  EXPECT_EQ(packed_int_get(packed, 1, DType::Int2), 1);
  EXPECT_EQ(packed_int_get(packed, 2, DType::Int2), -2);
  EXPECT_EQ(packed_int_get(packed, 3, DType::Int2), -1);
  EXPECT_EQ(packed_int_get(packed, 3, DType::UInt2), 3);
  EXPECT_EQ(packed_int_get(packed, 4, DType::Int2), -1);
  packed_set(packed, 5, 2, 2);
  EXPECT_EQ(packed[1], 0x0B);
  EXPECT_EQ(packed_int_get(packed, 5, DType::Int2), -2);
  // float4e2m1: every code's value; rounding to nearest even and saturation at 6
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint32_t c = 0; c < 16; ++c)
    EXPECT_EQ(minifloat_to_float(kE2M1, c), (c & 8 ? -1 : 1) * values[c & 7]) << c;
  EXPECT_EQ(minifloat_from(kE2M1, 0.25L, false), 0u);
  EXPECT_EQ(minifloat_from(kE2M1, 0.75L, false), 2u);
  EXPECT_EQ(minifloat_from(kE2M1, 5.0L, false), 6u);
  EXPECT_EQ(minifloat_from(kE2M1, 1e9L, false), 7u);
  EXPECT_EQ(minifloat_from(kE2M1, -HUGE_VALL, false), 15u);
  // float8e8m0: 2^(bits - 127), rounding modes, saturation
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
  EXPECT_EQ(e8m0_from_float(1.5f, true, E8M0Round::Up), 128);
  EXPECT_EQ(e8m0_from_float(1.5f, true, E8M0Round::Down), 127);
  EXPECT_EQ(e8m0_from_float(1.5f, true, E8M0Round::Nearest), 128);
  EXPECT_EQ(e8m0_from_float(1.25f, true, E8M0Round::Nearest), 127);
  EXPECT_EQ(e8m0_from_float(3e38f, true, E8M0Round::Up), 254);
  EXPECT_EQ(e8m0_from_float(3e38f, false, E8M0Round::Up), 255);
}

TEST(Tensor, RejectsNegativeOverflowingAndHugeShapes) {
  try {
    Tensor t(DType::Float32, {2, -1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
  }
  try {
    Tensor t(DType::Float32, {int64_t{1} << 40, int64_t{1} << 40});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  try {
    Tensor t(DType::Float32, {int64_t{1} << 20, int64_t{1} << 20, 1 << 10});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("more than this machine"), std::string::npos) << e.what();
  }
  // Strings count as the std::string objects they are: fuzz_run's [2^31] string attribute asked
  // for 64 GiB of them, and a failing new[] aborts under AddressSanitizer instead of throwing.
  try {
    Tensor t(DType::String, {int64_t{1} << 31});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("more than this machine"), std::string::npos) << e.what();
  }
}

TEST(Tensor, TypedAccessChecksTheDType) {
  Tensor t(DType::Int64, {2});
  EXPECT_NO_THROW(t.data<int64_t>());
  EXPECT_THROW(t.data<float>(), Error);
}

TEST(Tensor, CopiesShareStorageAndCloneDoesNot) {
  auto a = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  Tensor b = a;
  Tensor c = a.clone();
  EXPECT_TRUE(a.shares_storage_with(b));
  EXPECT_FALSE(a.shares_storage_with(c));
  c.data<float>()[0] = 9;
  EXPECT_EQ(a.data<float>()[0], 1);
  Tensor r = a.reshaped({4});
  EXPECT_TRUE(r.shares_storage_with(a));
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{4}));
  EXPECT_THROW(a.reshaped({3}), Error);
  EXPECT_THROW((Tensor::from_vector<float>({3}, {1, 2})), Error);
}

TEST(Tensor, ReshapedRejectsNegativeAndOverflowingShapes) {
  auto a = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  // Two negative dims multiply to the element count; before, that passed.
  expect_error(
      [&] {
        a.reshaped({-2, -2});
      },
      ErrorCode::InvalidArgument,
      {"cannot reshape a tensor of shape [2, 2] to [-2, -2]: a dim is negative"});
  // 2^32 * 2^32 wrapped around to 0 before (undefined behaviour): the product is checked.
  const int64_t big = int64_t{1} << 32;
  expect_error(
      [&] {
        a.reshaped({big, big, 4});
      },
      ErrorCode::InvalidArgument,
      {"cannot reshape a tensor of shape [2, 2] to [4294967296, 4294967296, 4]: "
       "element count overflows int64: 4294967296 * 4294967296"});
  EXPECT_EQ(Tensor(DType::Float32, {0, 3}).reshaped({big, 0}).shape(),
            (std::vector<int64_t>{big, 0}));
}

TEST(Half, RoundTripsAndRoundsToNearestEven) {
  for (float f : {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f})
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(float_to_half(1.f + 1.f / 2048), float_to_half(1.f));  // tie -> even
  EXPECT_EQ(half_to_float(0x3c00), 1.f);
  EXPECT_EQ(half_to_float(0x0001), 5.9604645e-08f);  // smallest subnormal
}

TEST(Shapes, PrintWithSymbols) {
  EXPECT_EQ(to_string(std::vector<int64_t>{1, 2}), "[1, 2]");
  EXPECT_EQ(to_string(std::vector<Dim>{{-1, "batch"}, {3, ""}, {-1, ""}}), "[batch, 3, ?]");
}

namespace quilt {
namespace {

// Tensor::uninitialized and Tensor::scratch make the same checks as the constructor, with the
// same messages.
TEST(TensorScratch, UninitializedAndScratchCheckShapesLikeTheConstructor) {
  Tensor u = Tensor::uninitialized(DType::Float32, {2, 3});
  EXPECT_EQ(u.numel(), 6);
  EXPECT_EQ(u.nbytes(), 24u);
  for (auto make :
       {+[](std::vector<int64_t> s) { return Tensor::uninitialized(DType::Float32, s); },
        +[](std::vector<int64_t> s) { return Tensor::scratch(DType::Float32, s, true); }}) {
    try {
      make({2, -1});
      ADD_FAILURE() << "a negative dim was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("has a negative dimension"), std::string::npos)
          << e.what();
    }
    try {
      make({int64_t{1} << 40, int64_t{1} << 40});
      ADD_FAILURE() << "an overflowing shape was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
      EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
    }
  }
}

// Tensor::scratch: large buffers come back on the next allocation of the same size, zeroed when
// asked, and small ones and other sizes are plain allocations.
TEST(TensorScratch, ReusesFreedBuffersOfTheSameSize) {
  const std::vector<int64_t> shape = {256, 1024};  // 1 MiB of float32
  const void* first = nullptr;
  {
    Tensor t = Tensor::scratch(DType::Float32, shape, false);
    first = t.raw_data();
    std::fill(t.data<float>(), t.data<float>() + t.numel(), 7.f);
  }
  Tensor again = Tensor::scratch(DType::Float32, shape, true);
  EXPECT_EQ(again.raw_data(), first);
  for (int64_t i = 0; i < again.numel(); i += 997) ASSERT_EQ(again.data<float>()[i], 0.f);
  // While `again` holds it, the same size needs another buffer.
  Tensor other = Tensor::scratch(DType::Float32, shape, false);
  EXPECT_NE(other.raw_data(), again.raw_data());
  EXPECT_EQ(other.shape(), shape);
  Tensor small = Tensor::scratch(DType::Int64, {3}, true);
  EXPECT_EQ(small.data<int64_t>()[2], 0);
}

// A request takes the most recently freed buffer of up to twice its size (the likeliest still in
// cache), not only one of its exact size; a buffer goes back with its whole size, so the next
// request of that size can have it; none more than twice a request's size is taken for it.
TEST(TensorScratch, TakesTheLatestFreedBufferOfUpToTwiceTheSize) {
  Tensor a = Tensor::scratch(DType::Float32, {1000, 1000}, false);  // 4 MB
  Tensor b = Tensor::scratch(DType::Float32, {700, 1000}, false);   // 2.8 MB
  const void* big = a.raw_data();
  const void* middle = b.raw_data();
  a = Tensor();
  b = Tensor();                                                   // the latest
  Tensor c = Tensor::scratch(DType::Float32, {600, 1000}, true);  // 2.4 MB: a or b; b is newer
  EXPECT_EQ(c.raw_data(), middle);
  for (int64_t i = 0; i < c.numel(); i += 997) ASSERT_EQ(c.data<float>()[i], 0.f);
  Tensor d = Tensor::scratch(DType::Float32, {600, 1000}, false);  // then a
  EXPECT_EQ(d.raw_data(), big);
  c = Tensor();
  d = Tensor();
  // 1 MB: neither (both more than twice as large) -- a new buffer.
  Tensor e = Tensor::scratch(DType::Float32, {250, 1000}, false);
  EXPECT_NE(e.raw_data(), big);
  EXPECT_NE(e.raw_data(), middle);
  // 4 MB: only a is large enough, and it came back whole although it last held 2.4 MB.
  Tensor f = Tensor::scratch(DType::Float32, {1000, 1000}, false);
  EXPECT_EQ(f.raw_data(), big);
  std::fill(f.data<float>(), f.data<float>() + f.numel(), 1.f);  // all 4 MB are its own
}

}  // namespace
}  // namespace quilt
