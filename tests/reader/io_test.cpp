// The Loader over raw and zstd shards, read through mappings and with pread, and over a
// shard that is truncated while it is read.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "reader/loader.h"
#include "tests/common/temp_dir.h"
#include "tests/reader/reader_fixtures.h"

using namespace shardify;
using testing::FixtureOptions;
using testing::TempDir;

namespace {

// Every batch of a run as bytes: indices, then each field's shape and data.
std::vector<std::vector<uint8_t>> Batches(const std::string& dir, IoMode io) {
  LoaderOptions o;
  o.batch_size = 16;
  o.threads = 2;
  o.sampler.epochs = 2;
  o.sampler.seed = 7;
  o.io = io;
  auto loader = Loader::Open(dir, o);
  REQUIRE(loader.ok());
  std::vector<std::vector<uint8_t>> out;
  while (true) {
    auto b = (*loader)->Next();
    REQUIRE(b.ok());
    if (!*b) break;
    std::vector<uint8_t> bytes;
    auto add = [&](const void* p, size_t n) {
      bytes.insert(bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    add((*b)->indices.data(), (*b)->indices.size() * 8);
    for (const BatchField& f : (*b)->fields) {
      add(f.shape.data(), f.shape.size() * 8);
      add(f.data, f.bytes);
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace

TEST_CASE("loader: raw and zstd shards, read with mmap or pread, give identical batches") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 300;
  fx.variable = true;  // a zero-padded field besides the fixed ones
  fx.shard_bytes = 16 << 10;
  REQUIRE(testing::WriteFixture(tmp / "zstd", fx).ok());
  fx.codec = Codec::kRaw;
  REQUIRE(testing::WriteFixture(tmp / "raw", fx).ok());
  const auto expected = Batches(tmp / "zstd", IoMode::kMmap);
  CHECK(expected.size() == 2 * ((300 + 15) / 16));
  CHECK(Batches(tmp / "zstd", IoMode::kPread) == expected);
  CHECK(Batches(tmp / "raw", IoMode::kMmap) == expected);
  CHECK(Batches(tmp / "raw", IoMode::kPread) == expected);
}

TEST_CASE("loader: a shard truncated while it is read gives an error naming it, not a signal") {
  for (IoMode io : {IoMode::kMmap, IoMode::kPread}) {
    for (Codec codec : {Codec::kRaw, Codec::kZstd}) {
      INFO(IoModeName(io) << (codec == Codec::kRaw ? " raw" : " zstd"));
      TempDir tmp;
      FixtureOptions fx;
      fx.samples = 256;
      fx.side = 64;                      // 4 KiB a sample, in one shard
      fx.random = codec == Codec::kRaw;  // zstd frames of smooth bytes, or raw random ones
      fx.shard_bytes = 64 << 20;
      fx.codec = codec;
      REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
      LoaderOptions o;
      o.batch_size = 8;
      o.threads = 2;
      o.prefetch = 2;
      o.sampler.epochs = 20;
      o.io = io;
      auto loader = Loader::Open(tmp / "ds", o);
      REQUIRE(loader.ok());
      for (int i = 0; i < 3; ++i) REQUIRE((*loader)->Next().ok());
      REQUIRE(::truncate((tmp / "ds/shard-00000.sfs").c_str(), 4096) == 0);  // the first page stays
      Status failed;
      for (int i = 0; i < 1000 && failed.ok(); ++i) {  // every sample is read within 2 epochs
        auto b = (*loader)->Next();
        REQUIRE((b.ok() ? *b != nullptr : true));
        failed = b.status();
      }
      REQUIRE_FALSE(failed.ok());
      CHECK((failed.code() == StatusCode::kIOError || failed.code() == StatusCode::kCorruption));
      CHECK_THAT(failed.message(), Catch::Contains("shard-00000.sfs"));
      CHECK((*loader)->Next().status().code() == failed.code());  // the Loader stays closed
    }
  }
}
