#include "format/elements.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace shardify {
namespace {

// What values a dtype holds: integers of `bits` value bits (plus a sign when signed), or
// floats with `bits` significand digits.
struct Range {
  DType type;
  bool is_float;
  bool is_signed;
  int bits;
};
// In promotion order: smallest first, an integer before a float of the same size.
constexpr Range kRanges[] = {
    {DType::kU8, false, false, 8},  {DType::kI8, false, true, 7},  {DType::kU16, false, false, 16},
    {DType::kI16, false, true, 15}, {DType::kF16, true, true, 11}, {DType::kU32, false, false, 32},
    {DType::kI32, false, true, 31}, {DType::kF32, true, true, 24}, {DType::kI64, false, true, 63},
    {DType::kF64, true, true, 53},
};

const Range& RangeOf(DType t) {
  for (const Range& r : kRanges) {
    if (r.type == t) return r;
  }
  return kRanges[0];
}

struct Half {  // a binary16 element, as stored
  uint16_t bits;
};

template <typename Fn>
void Visit(DType t, Fn&& fn) {
  switch (t) {
    case DType::kU8:
      fn(uint8_t{});
      return;
    case DType::kI8:
      fn(int8_t{});
      return;
    case DType::kU16:
      fn(uint16_t{});
      return;
    case DType::kI16:
      fn(int16_t{});
      return;
    case DType::kU32:
      fn(uint32_t{});
      return;
    case DType::kI32:
      fn(int32_t{});
      return;
    case DType::kF16:
      fn(Half{});
      return;
    case DType::kF32:
      fn(float{});
      return;
    case DType::kF64:
      fn(double{});
      return;
    case DType::kI64:
      fn(int64_t{});
      return;
  }
}

template <typename T>
double ToDouble(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return HalfToFloat(v.bits);
  } else {
    return static_cast<double>(v);
  }
}

// A double into integer dtype T: rounded half away from zero, saturated, NaN -> 0.
template <typename T>
T RoundToInt(double v) {
  if (std::isnan(v)) return 0;
  v = std::round(v);
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  // max() of a 64-bit type is not a double; 2^63 (its rounded value) is already too large.
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

template <typename From, typename To>
To Cast(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{FloatToHalf(static_cast<float>(ToDouble(v)))};
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(ToDouble(v));
  } else if constexpr (std::is_integral_v<From>) {  // integer to integer, saturated
    const auto x = static_cast<int64_t>(v);         // every integer dtype but u64 fits
    if (x < static_cast<int64_t>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (std::is_signed_v<To> || sizeof(To) < 8) {
      if (x > static_cast<int64_t>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    }
    return static_cast<To>(x);
  } else {
    return RoundToInt<To>(ToDouble(v));
  }
}

template <typename From, typename To>
void CastLoop(const uint8_t* src, uint8_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, src + i * sizeof(From), sizeof(From));
    const To out = Cast<From, To>(v);
    std::memcpy(dst + i * sizeof(To), &out, sizeof(To));
  }
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);   // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds past 65504: infinity
  if (abs < 0x38800000) {  // below the smallest normal half: a subnormal (or zero)
    // In units of the smallest subnormal (2^-24) the value is mant * 2^(e - 126) for the
    // 24-bit significand `mant` and biased exponent e <= 112: drop 126 - e bits, rounding
    // to nearest even (a carry into 0x400 gives the smallest normal, as it should).
    if (abs < 0x33000000) return sign;  // below half the smallest subnormal: zero
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    const uint32_t q = mant >> (shift), rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    const uint32_t r = q + ((rest > half || (rest == half && (q & 1))) ? 1 : 0);
    return static_cast<uint16_t>(sign | r);
  }
  // Normal: rebias the exponent, round the 23-bit mantissa to 10 bits (nearest even); a
  // carry into the exponent is what the addition should do.
  const uint32_t rebased = abs - (112u << 23);
  const uint32_t rest = rebased & 0x1fff, q = rebased >> 13;
  const uint32_t r = q + ((rest > 0x1000 || (rest == 0x1000 && (q & 1))) ? 1 : 0);
  return static_cast<uint16_t>(sign | r);
}

double ElementAsDouble(const uint8_t* p, DType t) {
  double out = 0;
  Visit(t, [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof v);
    out = ToDouble(v);
  });
  return out;
}

void ConvertElements(const uint8_t* src, DType from, uint8_t* dst, DType to, size_t n) {
  if (from == to) {
    if (n > 0) std::memcpy(dst, src, n * DTypeSize(from));
    return;
  }
  Visit(from, [&](auto f) { Visit(to, [&](auto t) { CastLoop<decltype(f), decltype(t)>(src, dst, n); }); });
}

std::vector<uint8_t> ConvertArray(const std::vector<uint8_t>& src, DType from, DType to) {
  const size_t n = src.size() / DTypeSize(from);
  std::vector<uint8_t> out(n * DTypeSize(to));
  ConvertElements(src.data(), from, out.data(), to, n);
  return out;
}

bool HoldsExactly(DType to, DType from) {
  const Range& t = RangeOf(to);
  const Range& f = RangeOf(from);
  if (to == from) return true;
  if (f.is_float) return t.is_float && t.bits >= f.bits;  // f16 < f32 < f64 in range and digits
  if (t.is_float) return t.bits >= f.bits;                // the integer's magnitude fits the digits
  if (f.is_signed && !t.is_signed) return false;
  return t.bits >= f.bits;
}

DType PromoteDTypes(const std::vector<DType>& inputs, bool* exact) {
  if (exact != nullptr) *exact = true;
  for (const Range& candidate : kRanges) {
    bool all = true;
    for (DType in : inputs) all = all && HoldsExactly(candidate.type, in);
    if (all) return candidate.type;
  }
  if (exact != nullptr) *exact = false;
  return DType::kF64;
}

}  // namespace shardify
