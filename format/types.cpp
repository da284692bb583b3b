#include "format/types.h"

#include <limits>

namespace shardify {

namespace {
struct DTypeRow {
  DType type;
  const char* name;
  size_t size;
};
constexpr DTypeRow kDTypes[] = {
    {DType::kU8, "u8", 1},   {DType::kI8, "i8", 1},   {DType::kU16, "u16", 2}, {DType::kI16, "i16", 2},
    {DType::kU32, "u32", 4}, {DType::kI32, "i32", 4}, {DType::kF16, "f16", 2}, {DType::kF32, "f32", 4},
    {DType::kF64, "f64", 8}, {DType::kI64, "i64", 8},
};
const DTypeRow* FindRow(DType t) {
  for (const auto& row : kDTypes)
    if (row.type == t) return &row;
  return nullptr;
}
}  // namespace

size_t DTypeSize(DType t) {
  const DTypeRow* row = FindRow(t);
  return row ? row->size : 0;
}

const char* DTypeName(DType t) {
  const DTypeRow* row = FindRow(t);
  return row ? row->name : "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& row : kDTypes)
    if (name == row.name) return row.type;
  return std::nullopt;
}

bool IsValidDType(uint8_t code) { return FindRow(static_cast<DType>(code)) != nullptr; }

const char* FieldKindName(FieldKind k) {
  switch (k) {
    case FieldKind::kNdarray:
      return "ndarray";
    case FieldKind::kInt:
      return "int";
    case FieldKind::kFloat:
      return "float";
    case FieldKind::kString:
      return "string";
    case FieldKind::kBytes:
      return "bytes";
  }
  return "?";
}

bool IsValidFieldKind(uint8_t code) { return code <= static_cast<uint8_t>(FieldKind::kBytes); }

Result<uint64_t> ElementCount(const Shape& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("negative dimension in shape " + ShapeToString(shape));
    const auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ud)
      return InvalidArgument("element count of shape " + ShapeToString(shape) + " overflows");
    n *= ud;
  }
  return n;
}

Result<uint64_t> ByteSize(const Shape& shape, DType t) {
  ASSIGN_OR_RETURN(uint64_t n, ElementCount(shape));
  const uint64_t size = DTypeSize(t);
  if (size == 0) return InvalidArgument("not a dtype code: " + std::to_string(static_cast<int>(t)));
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / size)
    return InvalidArgument("byte size of shape " + ShapeToString(shape) + " overflows");
  return n * size;
}

Result<Shape> ParseExtents(const std::string& text) {
  Shape out;
  size_t pos = 0;
  while (true) {
    const size_t x = text.find('x', pos);
    const std::string part = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("each size must be a positive integer");
    }
    const int64_t v = std::stoll(part);
    if (v < 1) return InvalidArgument("each size must be at least 1");
    out.push_back(v);
    if (x == std::string::npos) return out;
    pos = x + 1;
  }
}

std::string ExtentsToString(const Shape& extents) {
  std::string s;
  for (int64_t v : extents) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  return s + "]";
}

bool ShapeMatches(const Shape& schema, const Shape& concrete) {
  if (schema.size() != concrete.size()) return false;
  for (size_t i = 0; i < schema.size(); ++i) {
    if (concrete[i] < 0) return false;
    if (schema[i] >= 0 && schema[i] != concrete[i]) return false;
  }
  return true;
}

}  // namespace shardify
