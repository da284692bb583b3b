#include "media/png.h"

#include <zlib.h>

#include <catch2/catch.hpp>

using namespace shardify;
using namespace shardify::media;

namespace {
uint32_t BE32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
}  // namespace

TEST_CASE("media: PNG encoder writes a valid 16-bit gray image") {
  std::vector<uint16_t> px = {0, 1, 256, 65535, 4095, 7};
  auto png = EncodePng(px.data(), 3, 2, 1, 16);
  REQUIRE(png.ok());
  const std::vector<uint8_t>& b = *png;
  REQUIRE(b.size() > 8 + 25 + 12);
  CHECK(b[1] == 'P');
  CHECK(BE32(b.data() + 8) == 13);
  CHECK(std::string(b.begin() + 12, b.begin() + 16) == "IHDR");
  CHECK(BE32(b.data() + 16) == 3);
  CHECK(BE32(b.data() + 20) == 2);
  CHECK(b[24] == 16);
  CHECK(b[25] == 0);
  CHECK(BE32(b.data() + 29) == crc32(0, b.data() + 12, 17));  // IHDR CRC
  // Inflate IDAT and check the big-endian samples and filter bytes.
  const uint32_t idat_len = BE32(b.data() + 33);
  CHECK(std::string(b.begin() + 37, b.begin() + 41) == "IDAT");
  std::vector<uint8_t> raw(2 * (1 + 6));
  uLongf n = raw.size();
  REQUIRE(uncompress(raw.data(), &n, b.data() + 41, idat_len) == Z_OK);
  REQUIRE(n == raw.size());
  CHECK(raw[0] == 0);
  CHECK(raw[3] == 0);
  CHECK(raw[4] == 1);
  CHECK(raw[5] == 1);  // 256 big-endian
  CHECK(raw[6] == 0);
  CHECK(EncodePng(px.data(), 0, 2, 1, 16).status().code() == StatusCode::kInvalidArgument);
  CHECK(EncodePng(px.data(), 3, 2, 5, 8).status().code() == StatusCode::kInvalidArgument);
}
