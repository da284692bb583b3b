// Element values of every DType: reading one as a double, converting arrays between
// dtypes, half precision, and which dtype holds the values of others exactly.
//
// Elements are little-endian in memory, as the format stores them (and as our hosts are).
// Every function is pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/types.h"

namespace shardify {

// IEEE 754 binary16 <-> binary32. FloatToHalf rounds to nearest even; values beyond the
// half range become infinities, NaN stays NaN.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);

// The element at `p` as a double (exact for every dtype but i64 beyond 2^53).
double ElementAsDouble(const uint8_t* p, DType t);

// Converts `n` elements of `from` at src into `to` at dst (non-overlapping). A value that
// `to` holds is converted exactly. Otherwise, into an integer dtype: rounded half away
// from zero and saturated to the dtype's range, NaN becomes 0; into a float dtype: rounded
// to nearest, beyond its range an infinity.
void ConvertElements(const uint8_t* src, DType from, uint8_t* dst, DType to, size_t n);
// ConvertElements into a new buffer (n elements of `from` in `src`).
std::vector<uint8_t> ConvertArray(const std::vector<uint8_t>& src, DType from, DType to);

// True when every value of `from` is also a value of `to` (u8 in u16, i16 in f32, f16
// in f32, u8 in f16; not i16 in u16, u16 in f16, i32 in f32).
bool HoldsExactly(DType to, DType from);

// The dtype of a field whose inputs have the dtypes `inputs`: the first of u8, i8, u16,
// i16, f16, u32, i32, f32, i64, f64 that holds every input exactly (so the smallest, and
// an integer dtype before a float of the same size): u8 + u16 -> u16, u8 + i8 -> i16,
// i16 + u16 -> i32, u8 + f32 -> f32, u16 + f16 -> f32, i32 + f32 -> f64. When none does
// (i64 with a float), f64, and *exact (when non-null) is set to false.
// Precondition: `inputs` is not empty.
DType PromoteDTypes(const std::vector<DType>& inputs, bool* exact = nullptr);

}  // namespace shardify
