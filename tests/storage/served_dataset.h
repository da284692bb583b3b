// A dataset of random 16x16 images in shards of about 3,000 bytes, written by the test at
// tmp/www/ds and served by a real lighttpd as server.url() + "/ds". Tests check
// server.started() (why() says what failed).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "base/file.h"
#include "format/dataset.h"
#include "tests/common/temp_dir.h"
#include "tests/reader/reader_fixtures.h"
#include "tests/storage/servers.h"

namespace shardify::testing {

struct ServedDataset {
  explicit ServedDataset(uint64_t samples) : server(Written(tmp, samples), tmp.path()) {}
  static std::string Written(const TempDir& tmp, uint64_t samples) {
    FixtureOptions fx;
    fx.samples = samples;
    fx.side = 16;
    fx.random = true;
    fx.shard_bytes = 3000;
    REQUIRE(MakeDirs(tmp / "www").ok());
    REQUIRE(WriteFixture(tmp / "www/ds", fx).ok());
    return tmp / "www";
  }
  // The sizes of its shards, smallest first.
  std::vector<uint64_t> ShardSizes() const {
    auto local = Dataset::Open(tmp / "www/ds");
    REQUIRE(local.ok());
    std::vector<uint64_t> sizes;
    for (const ShardInfo& s : (*local)->manifest().shards) sizes.push_back(s.size_bytes);
    std::sort(sizes.begin(), sizes.end());
    return sizes;
  }
  uint64_t LargestShard() const { return ShardSizes().back(); }
  TempDir tmp;
  Lighttpd server;
};

}  // namespace shardify::testing
