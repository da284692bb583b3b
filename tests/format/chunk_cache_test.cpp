#include "format/chunk_cache.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

using namespace shardify;

namespace {

ChunkCache::Bytes Chunk(size_t n, uint8_t v) { return std::make_shared<const std::vector<uint8_t>>(n, v); }

}  // namespace

TEST_CASE("chunk cache: the least recently used go first, within the bound") {
  ChunkCache cache(300);
  cache.Insert(1, 0, 0, Chunk(100, 1));
  cache.Insert(1, 0, 1, Chunk(100, 2));
  cache.Insert(2, 0, 0, Chunk(100, 3));
  CHECK(cache.bytes() == 300);
  REQUIRE(cache.Find(1, 0, 0) != nullptr);  // now the most recent
  cache.Insert(2, 1, 0, Chunk(100, 4));     // drops (1, 0, 1), the least recent
  CHECK(cache.Find(1, 0, 1) == nullptr);
  CHECK(cache.Find(1, 0, 0)->at(0) == 1);
  CHECK(cache.Find(2, 0, 0)->at(0) == 3);
  CHECK(cache.Find(2, 1, 0)->at(0) == 4);  // the field is part of the key
  CHECK(cache.bytes() == 300);
  CHECK(cache.hits() == 4);
  CHECK(cache.misses() == 1);
}

TEST_CASE("chunk cache: a chunk beyond the capacity is not kept, and a key is kept once") {
  ChunkCache cache(100);
  cache.Insert(0, 0, 0, Chunk(101, 1));
  CHECK(cache.bytes() == 0);
  CHECK(cache.Find(0, 0, 0) == nullptr);
  cache.Insert(0, 0, 0, Chunk(60, 1));
  cache.Insert(0, 0, 0, Chunk(60, 2));  // present: the first stays
  CHECK(cache.bytes() == 60);
  CHECK(cache.Find(0, 0, 0)->at(0) == 1);
  ChunkCache::Bytes held = cache.Find(0, 0, 0);
  cache.Insert(0, 0, 1, Chunk(60, 3));  // drops the first; a holder keeps its bytes
  CHECK(cache.Find(0, 0, 0) == nullptr);
  CHECK(held->size() == 60);
  CHECK(held->at(59) == 1);
}
