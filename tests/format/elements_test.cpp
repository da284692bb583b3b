#include "format/elements.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

using namespace shardify;

namespace {

template <typename To, typename From>
To Convert(From v, DType from, DType to) {
  uint8_t src[8], dst[8];
  std::memcpy(src, &v, sizeof v);
  ConvertElements(src, from, dst, to, 1);
  To out;
  std::memcpy(&out, dst, sizeof out);
  return out;
}

}  // namespace

TEST_CASE("format: a field's dtype is the smallest that holds every input exactly") {
  using D = DType;
  CHECK(PromoteDTypes({D::kU8}) == D::kU8);
  CHECK(PromoteDTypes({D::kU8, D::kU16}) == D::kU16);
  CHECK(PromoteDTypes({D::kU8, D::kI8}) == D::kI16);
  CHECK(PromoteDTypes({D::kI16, D::kU16}) == D::kI32);
  CHECK(PromoteDTypes({D::kU8, D::kF32}) == D::kF32);
  CHECK(PromoteDTypes({D::kU8, D::kF16}) == D::kF16);
  CHECK(PromoteDTypes({D::kU16, D::kF16}) == D::kF32);
  CHECK(PromoteDTypes({D::kI32, D::kF32}) == D::kF64);
  CHECK(PromoteDTypes({D::kU32, D::kI8}) == D::kI64);
  bool exact = true;
  CHECK(PromoteDTypes({D::kI64, D::kF32}, &exact) == D::kF64);
  CHECK_FALSE(exact);
  CHECK(HoldsExactly(D::kF32, D::kI16));
  CHECK_FALSE(HoldsExactly(D::kF32, D::kI32));
  CHECK_FALSE(HoldsExactly(D::kU16, D::kI8));
  CHECK_FALSE(HoldsExactly(D::kI64, D::kF16));
}

TEST_CASE("format: converting elements is exact where it can be, else rounds and saturates") {
  using D = DType;
  CHECK(Convert<uint8_t>(2.5f, D::kF32, D::kU8) == 3);
  CHECK(Convert<uint8_t>(-3.7f, D::kF32, D::kU8) == 0);
  CHECK(Convert<uint8_t>(255.6f, D::kF32, D::kU8) == 255);
  CHECK(Convert<uint8_t>(std::numeric_limits<float>::quiet_NaN(), D::kF32, D::kU8) == 0);
  CHECK(Convert<int16_t>(-2.5, D::kF64, D::kI16) == -3);
  CHECK(Convert<uint16_t>(int16_t{-5}, D::kI16, D::kU16) == 0);
  CHECK(Convert<int16_t>(uint32_t{4000000000u}, D::kU32, D::kI16) == 32767);
  CHECK(Convert<int64_t>(1e30, D::kF64, D::kI64) == std::numeric_limits<int64_t>::max());
  CHECK(Convert<int32_t>(int64_t{-123456789}, D::kI64, D::kI32) == -123456789);
  CHECK(Convert<double>(uint16_t{65535}, D::kU16, D::kF64) == 65535.0);
  const uint16_t h = Convert<uint16_t>(uint8_t{255}, D::kU8, D::kF16);
  CHECK(HalfToFloat(h) == 255.0f);
  CHECK(ElementAsDouble(reinterpret_cast<const uint8_t*>(&h), D::kF16) == 255.0);
}

TEST_CASE("format: half precision rounds to nearest even and round-trips every half") {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) {
      CHECK(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    if (FloatToHalf(f) != h) FAIL("half 0x" << std::hex << b << " does not round-trip");
  }
  CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie: to even (1.0)
  CHECK(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie: to even (up)
  CHECK(FloatToHalf(65519.0f) == 0x7bff);                          // 65504, the largest half
  CHECK(FloatToHalf(65520.0f) == 0x7c00);                          // rounds past it: infinity
  CHECK(FloatToHalf(-1e9f) == 0xfc00);
  CHECK(FloatToHalf(std::ldexp(1.0f, -25)) == 0);  // half the smallest subnormal: to even
  CHECK(FloatToHalf(std::ldexp(1.0f, -25) * 1.001f) == 0x0001);
  CHECK(FloatToHalf(std::ldexp(1.0f, -14) * 0.9999f) == 0x0400);  // rounds up into the normals
  CHECK(FloatToHalf(-0.0f) == 0x8000);
}
