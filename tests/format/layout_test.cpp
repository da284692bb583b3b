#include "format/layout.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

using namespace shardify;

TEST_CASE("format: header and footer encode and decode symmetrically") {
  FileHeader h{kShardMagic, kFormatVersion, 0};
  uint8_t hb[16];
  EncodeFileHeader(h, hb);
  CHECK(DecodeFileHeader(hb) == h);
  CHECK(std::memcmp(hb, "\x89SFS\r\n\x1a\n", 8) == 0);

  ShardFooter f;
  f.index_offset = 1024;
  f.index_length = 200;
  f.index_checksum = 0x0123456789abcdefull;
  f.version = kFormatVersion;
  uint8_t fb[48];
  EncodeShardFooter(f, hb, fb);
  ShardFooter back = DecodeShardFooter(fb);
  f.footer_checksum = back.footer_checksum;
  CHECK(back == f);
  CHECK(CheckShardEnds(hb, fb, 1024 + 200 + 48, "s").ok());
  // Little-endian on disk whatever the host.
  CHECK(fb[0] == 0x00);
  CHECK(fb[1] == 0x04);
  CHECK(fb[16] == 0xef);
}

TEST_CASE("format: shard file names have five digits or more, and sort as text up to shard 99999") {
  CHECK(ShardFileName(0) == "shard-00000.sfs");
  CHECK(ShardFileName(42) == "shard-00042.sfs");
  CHECK(ShardFileName(99999) == "shard-99999.sfs");
  CHECK(ShardFileName(100000) == "shard-100000.sfs");
  CHECK(ShardFileName(123456) == "shard-123456.sfs");
  CHECK(ShardFileName(9) < ShardFileName(10));
  CHECK(ShardFileName(99998) < ShardFileName(99999));
  // Past 99999 a name grows a digit, and text order no longer follows shard order: the
  // order of shards is the manifest's, never their names'.
  CHECK(ShardFileName(100000) < ShardFileName(99999));
  auto numeric_less = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  };
  for (uint64_t n : {0ull, 9ull, 99998ull, 99999ull, 100000ull, 999999ull}) {
    INFO(n);
    CHECK(numeric_less(ShardFileName(n), ShardFileName(n + 1)));
  }
}
