#include "reader/sampler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <vector>

namespace shardify {
namespace {

Sampler Make(SamplerOptions o, uint64_t first, uint64_t count, size_t batch, std::vector<uint64_t> shards = {},
             std::vector<int64_t> labels = {}) {
  Result<Sampler> s = Sampler::Create(o, first, count, batch, std::move(shards), std::move(labels));
  REQUIRE(s.ok());
  return std::move(s).value();
}

// Every batch of every epoch of a sampler, flattened per epoch.
std::vector<std::vector<uint64_t>> Epochs(const Sampler& s) {
  std::vector<std::vector<uint64_t>> out;
  std::vector<uint64_t> batch;
  for (uint64_t e = 0; e < s.options().epochs; ++e) {
    const std::vector<uint64_t> order = s.EpochOrder(e);
    out.emplace_back();
    for (uint64_t b = 0; b < s.batches_per_epoch(); ++b) {
      s.BatchIndices(order, b, &batch);
      out.back().insert(out.back().end(), batch.begin(), batch.end());
    }
  }
  return out;
}

bool IsPermutation(std::vector<uint64_t> v, uint64_t first, uint64_t count) {
  if (v.size() != count) return false;
  std::sort(v.begin(), v.end());
  for (uint64_t i = 0; i < count; ++i) {
    if (v[i] != first + i) return false;
  }
  return true;
}

TEST_CASE("sampler: sequential order is the split order") {
  SamplerOptions o;
  o.order = SampleOrder::kSequential;
  const Sampler s = Make(o, 10, 25, 8);
  CHECK(s.batches_per_epoch() == 4);
  std::vector<uint64_t> expected(25);
  for (uint64_t i = 0; i < 25; ++i) expected[i] = 10 + i;
  CHECK(Epochs(s)[0] == expected);
}

TEST_CASE("sampler: shuffle is a seeded permutation that changes per epoch") {
  SamplerOptions o;
  o.seed = 7;
  o.epochs = 3;
  const auto a = Epochs(Make(o, 100, 1000, 32));
  const auto b = Epochs(Make(o, 100, 1000, 32));
  CHECK(a == b);
  for (const auto& epoch : a) CHECK(IsPermutation(epoch, 100, 1000));
  CHECK(a[0] != a[1]);
  CHECK(a[1] != a[2]);
  o.seed = 8;
  CHECK(Epochs(Make(o, 100, 1000, 32))[0] != a[0]);
  // Not the identity: at most a few fixed points in 1000.
  size_t fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) fixed += a[0][i] == 100 + i;
  CHECK(fixed < 20);
}

TEST_CASE("sampler: shard-windowed order mixes only a window of shards at a time") {
  SamplerOptions o;
  o.order = SampleOrder::kShardWindowed;
  o.window_shards = 2;
  o.seed = 3;
  // 10 shards of 50 samples; the split covers samples [25, 475).
  std::vector<uint64_t> starts;
  for (uint64_t k = 0; k < 10; ++k) starts.push_back(k * 50);
  const Sampler s = Make(o, 25, 450, 10, starts);
  const std::vector<uint64_t> order = s.EpochOrder(0);
  REQUIRE(IsPermutation(order, 25, 450));
  // The order splits into consecutive runs, each made of whole shard pieces of at most
  // two shards (a window); a global shuffle would mix all ten shards in every run.
  auto piece = [](uint64_t shard) -> size_t { return shard == 0 || shard == 9 ? 25 : 50; };
  size_t pos = 0, runs = 0;
  while (pos < order.size()) {
    std::set<uint64_t> shards;
    size_t length = 0, need = 0;
    do {
      if (shards.insert(order[pos] / 50).second) need += piece(order[pos] / 50);
      ++pos;
      ++length;
    } while (length < need && pos < order.size());
    CHECK(length == need);
    CHECK(shards.size() <= 2);
    ++runs;
  }
  CHECK(runs >= 5);
  CHECK(!std::is_sorted(order.begin(), order.end()));
  CHECK(s.EpochOrder(1) != order);
}

TEST_CASE("sampler: class-balanced draws every class about equally") {
  SamplerOptions o;
  o.order = SampleOrder::kClassBalanced;
  o.seed = 11;
  // 4000 samples: class 0 is 85%, classes 1..3 share the rest; -1 is never drawn.
  std::vector<int64_t> labels(4000);
  for (size_t i = 0; i < labels.size(); ++i) {
    labels[i] = i % 20 < 17 ? 0 : static_cast<int64_t>(1 + i % 3);
  }
  labels[5] = -1;
  const Sampler s = Make(o, 0, labels.size(), 100, {}, labels);
  const std::vector<uint64_t> order = s.EpochOrder(0);
  REQUIRE(order.size() == labels.size());
  std::map<int64_t, size_t> counts;
  for (uint64_t i : order) counts[labels[i]]++;
  CHECK(counts.count(-1) == 0);
  REQUIRE(counts.size() == 4);
  for (const auto& [label, n] : counts) {
    INFO("label " << label << " drawn " << n);
    CHECK(n > 850);
    CHECK(n < 1150);
  }
}

TEST_CASE("sampler: ranks are disjoint, equal and cover the epoch") {
  SamplerOptions o;
  o.seed = 5;
  o.world_size = 3;
  for (bool drop : {false, true}) {
    for (uint64_t count : {99u, 100u, 101u}) {
      o.drop_last = drop;
      std::vector<uint64_t> all;
      uint64_t batches = 0;
      for (size_t r = 0; r < 3; ++r) {
        o.rank = r;
        const Sampler s = Make(o, 0, count, 8);
        if (r == 0) batches = s.batches_per_epoch();
        CHECK(s.batches_per_epoch() == batches);
        const auto e = Epochs(s)[0];
        CHECK(e.size() == s.samples_per_rank());
        all.insert(all.end(), e.begin(), e.end());
      }
      INFO("count " << count << " drop_last " << drop);
      std::set<uint64_t> unique(all.begin(), all.end());
      if (drop) {
        CHECK(unique.size() == all.size());  // disjoint
        CHECK(all.size() == count / 3 / 8 * 8 * 3);
      } else {
        CHECK(unique.size() == count);             // union complete
        CHECK(all.size() == (count + 2) / 3 * 3);  // padded by at most world - 1
      }
    }
  }
}

TEST_CASE("sampler: drop_last drops the partial batch") {
  SamplerOptions o;
  o.drop_last = true;
  const Sampler s = Make(o, 0, 70, 32);
  CHECK(s.batches_per_epoch() == 2);
  const auto e = Epochs(s)[0];
  CHECK(e.size() == 64);
  CHECK(std::set<uint64_t>(e.begin(), e.end()).size() == 64);
  o.drop_last = false;
  CHECK(Make(o, 0, 70, 32).batches_per_epoch() == 3);
}

TEST_CASE("sampler: resume points advance across epochs") {
  SamplerOptions o;
  o.epochs = 3;
  const Sampler s = Make(o, 0, 100, 30);  // 4 batches per epoch
  CHECK(s.total_batches() == 12);
  CHECK(s.Advance(5) == SamplerState{1, 1});
  o.resume = SamplerState{1, 3};
  const Sampler r = Make(o, 0, 100, 30);
  CHECK(r.total_batches() == 5);
  CHECK(r.Advance(1) == SamplerState{2, 0});
  o.resume = SamplerState{2, 4};  // end of the last epoch
  CHECK(Make(o, 0, 100, 30).total_batches() == 0);
  o.resume = SamplerState{3, 1};
  CHECK(Sampler::Create(o, 0, 100, 30).status().code() == StatusCode::kOutOfRange);
}

TEST_CASE("sampler: bad options are refused") {
  SamplerOptions o;
  CHECK(Sampler::Create(o, 0, 10, 0).status().code() == StatusCode::kInvalidArgument);
  CHECK(Sampler::Create(o, 0, 0, 4).status().code() == StatusCode::kInvalidArgument);
  o.world_size = 2;
  o.rank = 2;
  CHECK(Sampler::Create(o, 0, 10, 4).status().code() == StatusCode::kInvalidArgument);
  o.rank = 0;
  o.drop_last = true;
  CHECK(Sampler::Create(o, 0, 10, 8).status().code() == StatusCode::kInvalidArgument);
  o = SamplerOptions();
  o.order = SampleOrder::kClassBalanced;
  CHECK(Sampler::Create(o, 0, 3, 1, {}, {-1, -1, -1}).status().code() == StatusCode::kInvalidArgument);
  CHECK(Sampler::Create(o, 0, 3, 1).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("sampler: repeats visit every sample that many times per epoch, in fresh orders") {
  SamplerOptions o;
  o.seed = 9;
  o.epochs = 2;
  o.repeats = 3;
  const Sampler s = Make(o, 10, 5, 4);
  CHECK(s.batches_per_epoch() == 4);  // 15 samples in batches of 4
  const auto epochs = Epochs(s);
  REQUIRE(epochs.size() == 2);
  for (const auto& e : epochs) {
    REQUIRE(e.size() == 15);
    for (int pass = 0; pass < 3; ++pass) {
      CHECK(IsPermutation(std::vector<uint64_t>(e.begin() + 5 * pass, e.begin() + 5 * (pass + 1)), 10, 5));
    }
  }
  CHECK(epochs[0] != epochs[1]);
  // The passes are the orders a run without repeats would give for epochs 0..5.
  SamplerOptions plain = o;
  plain.repeats = 1;
  plain.epochs = 6;
  const auto flat = Epochs(Make(plain, 10, 5, 5));
  std::vector<uint64_t> joined;
  for (int k = 0; k < 3; ++k) joined.insert(joined.end(), flat[size_t(k)].begin(), flat[size_t(k)].end());
  CHECK(epochs[0] == joined);
  o.repeats = 0;
  CHECK(Sampler::Create(o, 0, 5, 4).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("sampler: every order has one name, read back by ParseSampleOrder, with the short forms") {
  for (SampleOrder o :
       {SampleOrder::kSequential, SampleOrder::kShuffle, SampleOrder::kShardWindowed, SampleOrder::kClassBalanced}) {
    INFO(SampleOrderName(o));
    CHECK(ParseSampleOrder(SampleOrderName(o)) == o);
  }
  CHECK(ParseSampleOrder("windowed") == SampleOrder::kShardWindowed);
  CHECK(ParseSampleOrder("balanced") == SampleOrder::kClassBalanced);
  CHECK_FALSE(ParseSampleOrder("random").has_value());
  CHECK(SampleOrderNames(" | ") == "sequential | shuffle | shard_windowed | class_balanced");
}

}  // namespace
}  // namespace shardify
