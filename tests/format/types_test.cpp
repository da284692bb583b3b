#include "format/types.h"

#include <catch2/catch.hpp>

using namespace shardify;

TEST_CASE("format: dtype names, sizes and codes round trip") {
  const DType all[] = {DType::kU8,  DType::kI8,  DType::kU16, DType::kI16, DType::kU32,
                       DType::kI32, DType::kF16, DType::kF32, DType::kF64, DType::kI64};
  const size_t sizes[] = {1, 1, 2, 2, 4, 4, 2, 4, 8, 8};
  for (size_t i = 0; i < 10; ++i) {
    CHECK(DTypeSize(all[i]) == sizes[i]);
    CHECK(ParseDType(DTypeName(all[i])) == all[i]);
    CHECK(IsValidDType(static_cast<uint8_t>(all[i])));
  }
  CHECK_FALSE(IsValidDType(0));
  CHECK_FALSE(IsValidDType(11));
  CHECK_FALSE(ParseDType("f128").has_value());
}

TEST_CASE("format: shapes count elements and catch overflow") {
  CHECK(*ElementCount({}) == 1);
  CHECK(*ElementCount({2, 3, 4}) == 24);
  CHECK(*ElementCount({5, 0}) == 0);
  CHECK(*ByteSize({28, 28}, DType::kU16) == 1568);
  CHECK(ElementCount({-1, 3}).status().code() == StatusCode::kInvalidArgument);
  CHECK_FALSE(ElementCount({1ll << 40, 1ll << 40}).ok());
  CHECK_FALSE(ByteSize({1ll << 61}, DType::kF64).ok());
  CHECK(ShapeToString({-1, 28}) == "[?, 28]");
  CHECK(ShapeMatches({-1, 28}, {5, 28}));
  CHECK_FALSE(ShapeMatches({-1, 28}, {5, 27}));
  CHECK_FALSE(ShapeMatches({28}, {28, 1}));
}

TEST_CASE("types: extents parse from and print to DxHxW") {
  CHECK(*ParseExtents("128x96x64") == Shape{128, 96, 64});
  CHECK(*ParseExtents("7") == Shape{7});
  CHECK(ExtentsToString({128, 96, 64}) == "128x96x64");
  for (const char* bad : {"", "0x4", "4x", "x4", "4X4", "-1x4", "1e3", "1234567890x2", "4x4x"}) {
    INFO(bad);
    CHECK(ParseExtents(bad).status().code() == StatusCode::kInvalidArgument);
  }
}
