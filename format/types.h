// Element types, field kinds and shapes shared by every part of shardify.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shardify {

// Element type of an ndarray field. Values are the on-disk codes (FORMAT.md 4, "FieldKind and DType codes").
enum class DType : uint8_t {
  kU8 = 1,
  kI8 = 2,
  kU16 = 3,
  kI16 = 4,
  kU32 = 5,
  kI32 = 6,
  kF16 = 7,
  kF32 = 8,
  kF64 = 9,
  kI64 = 10,
};

// What a field holds. Values are the on-disk codes (FORMAT.md 4, "FieldKind and DType codes").
enum class FieldKind : uint8_t {
  kNdarray = 0,  // an n-d array stored as a blob (zstd frame or raw)
  kInt = 1,      // one int64 per sample, inline in the shard index
  kFloat = 2,    // one float64 per sample, inline in the shard index
  kString = 3,   // one UTF-8 string per sample, inline in the shard index
  kBytes = 4,    // one byte string per sample, inline in the shard index
};

// Size in bytes of one element; 0 for a code that is not a DType.
size_t DTypeSize(DType t);
// "u8", "i16", "f32", ...; "?" for a code that is not a DType.
const char* DTypeName(DType t);
// Inverse of DTypeName.
std::optional<DType> ParseDType(std::string_view name);
// True when `code` is one of the DType values above.
bool IsValidDType(uint8_t code);

// "ndarray", "int", "float", "string", "bytes".
const char* FieldKindName(FieldKind k);
bool IsValidFieldKind(uint8_t code);

// A shape, outermost axis first. In a field's schema a dimension of -1 means
// "varies per sample"; in a sample's shape every dimension is >= 0.
using Shape = std::vector<int64_t>;

// Largest rank an ndarray field may have.
inline constexpr size_t kMaxRank = 8;

// Number of elements of a concrete shape, or an error when a dimension is negative
// or the product overflows int64.
Result<uint64_t> ElementCount(const Shape& shape);
// The product of the dimensions of a shape that ElementCount accepted (or of some of its
// axes), unchecked.
inline uint64_t ShapeProduct(const Shape& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}
// ElementCount(shape) * DTypeSize(t), overflow-checked.
Result<uint64_t> ByteSize(const Shape& shape, DType t);
// "[28, 28]" or "[?, 256]" (-1 shown as ?).
std::string ShapeToString(const Shape& shape);
// "128x96x64" -> {128, 96, 64}: positive integers of at most 9 digits joined by 'x', the
// syntax of patch sizes on the command lines. InvalidArgument says what is wrong (callers
// name the flag and check the rank).
Result<Shape> ParseExtents(const std::string& text);
// Inverse of ParseExtents: {128, 96, 64} -> "128x96x64".
std::string ExtentsToString(const Shape& extents);
// True when `concrete` has the rank of `schema` and equals it in every fixed dimension.
bool ShapeMatches(const Shape& schema, const Shape& concrete);

}  // namespace shardify
