#include "reader/loader.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "format/dataset.h"
#include "tests/common/temp_dir.h"
#include "tests/reader/reader_fixtures.h"

namespace shardify {
namespace {

using testing::FixtureOptions;
using testing::TempDir;

std::unique_ptr<Loader> OpenLoader(const std::string& dir, const LoaderOptions& o) {
  Result<std::unique_ptr<Loader>> l = Loader::Open(dir, o);
  INFO(l.status().ToString());
  REQUIRE(l.ok());
  return std::move(l).value();
}

// Everything a run produced: per batch its place, indices and a digest of its bytes.
struct Run {
  std::vector<SamplerState> at;
  std::vector<std::vector<uint64_t>> indices;
  std::vector<std::string> bytes;
  bool operator==(const Run& o) const { return at == o.at && indices == o.indices && bytes == o.bytes; }
};

std::string Bytes(const Batch& b) {
  std::string out;
  for (const BatchField& f : b.fields) {
    out += f.name + ShapeToString(f.shape);
    out.append(static_cast<const char*>(f.data), f.bytes);
  }
  return out;
}

// Checks each sample's bytes against what the fixture wrote for its index.
void CheckContents(const Batch& b, const FixtureOptions& fx) {
  const BatchField* image = b.Find("image");
  const BatchField* label = b.Find("label");
  const BatchField* score = b.Find("score");
  REQUIRE(image != nullptr);
  REQUIRE(label != nullptr);
  REQUIRE(score != nullptr);
  CHECK(b.Find("path") == nullptr);
  CHECK(reinterpret_cast<uintptr_t>(image->data) % 256 == 0);
  const size_t n = b.size();
  REQUIRE(image->shape == Shape{static_cast<int64_t>(n), 1, fx.side, fx.side});
  const size_t stride = static_cast<size_t>(fx.side * fx.side);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t index = b.indices[i];
    const auto expected = testing::FixtureImage(fx, index);
    CHECK(std::memcmp(static_cast<const uint8_t*>(image->data) + i * stride, expected.data(), stride) == 0);
    CHECK(static_cast<const int64_t*>(label->data)[i] == testing::FixtureLabel(fx, index));
    CHECK(static_cast<const double*>(score->data)[i] == static_cast<double>(index) * 0.5);
  }
}

Run Collect(Loader& loader, const FixtureOptions* fx = nullptr, size_t max_batches = SIZE_MAX) {
  Run run;
  for (size_t k = 0; k < max_batches; ++k) {
    Result<std::shared_ptr<Batch>> b = loader.Next();
    INFO(b.status().ToString());
    REQUIRE(b.ok());
    if (!*b) break;
    run.at.push_back({(*b)->epoch, (*b)->step});
    run.indices.push_back((*b)->indices);
    run.bytes.push_back(Bytes(**b));
    if (fx != nullptr) CheckContents(**b, *fx);
  }
  return run;
}

TEST_CASE("reader: the same seed gives the same batches, another seed others") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 300;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 16;
  o.sampler.seed = 42;
  o.sampler.epochs = 2;
  const Run a = Collect(*OpenLoader(tmp / "ds", o), &fx);
  const Run b = Collect(*OpenLoader(tmp / "ds", o), &fx);
  CHECK(a.indices.size() == 2 * 19);
  CHECK(a == b);
  o.sampler.seed = 43;
  CHECK(!(Collect(*OpenLoader(tmp / "ds", o)) == a));
}

TEST_CASE("reader: 1, 2 and 4 threads give the same batches, variable shapes padded") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 257;
  fx.variable = true;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 10;
  o.prefetch = 3;
  o.sampler.seed = 9;
  o.threads = 1;
  const Run one = Collect(*OpenLoader(tmp / "ds", o), &fx);
  o.threads = 2;
  const Run two = Collect(*OpenLoader(tmp / "ds", o), &fx);
  o.threads = 4;
  const Run four = Collect(*OpenLoader(tmp / "ds", o), &fx);
  CHECK(one.indices.size() == 26);
  CHECK(one == two);
  CHECK(one == four);

  // The variable field: each sample's rows, zero-padded to the batch maximum.
  auto loader = OpenLoader(tmp / "ds", o);
  auto b = loader->Next();
  REQUIRE(b.ok());
  const BatchField* var = (*b)->Find("var");
  REQUIRE(var != nullptr);
  REQUIRE(var->sample_shapes.size() == 10);
  const int64_t rows = var->shape[1];
  CHECK(var->shape == Shape{10, rows, 3});
  for (size_t i = 0; i < 10; ++i) {
    const uint64_t index = (*b)->indices[i];
    CHECK(var->sample_shapes[i] == Shape{static_cast<int64_t>(index % 5 + 1), 3});
    const auto* p = static_cast<const uint16_t*>(var->data) + i * rows * 3;
    for (int64_t k = 0; k < rows * 3; ++k) {
      const uint16_t expected = k < var->sample_shapes[i][0] * 3 ? static_cast<uint16_t>(index * 10 + k + 1) : 0;
      CHECK(p[k] == expected);
    }
  }
}

TEST_CASE("reader: small pictures stored as shardify stores them read the same with 1, 2 and 4 threads") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 150;
  fx.side = 28;
  fx.pictures = true;
  fx.shard_bytes = 16 << 10;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  {  // the frames keep their literals raw: the fast path this fixture is for
    auto ds = Dataset::Open(tmp / "ds");
    REQUIRE(ds.ok());
    const BlobInfo b = *(*ds)->Sample(3)->blob(0);
    REQUIRE(b.codec == Codec::kZstdDict);
    CHECK(testing::ZstdLiteralsType(std::vector<uint8_t>(b.data, b.data + b.stored_size)) == 0);
  }
  LoaderOptions o;
  o.batch_size = 16;
  o.sampler.epochs = 2;
  o.threads = 1;
  const Run one = Collect(*OpenLoader(tmp / "ds", o), &fx);
  o.threads = 2;
  const Run two = Collect(*OpenLoader(tmp / "ds", o), &fx);
  o.threads = 4;
  const Run four = Collect(*OpenLoader(tmp / "ds", o), &fx);
  CHECK(one.indices.size() == 2 * 10);
  CHECK(one == two);
  CHECK(one == four);
}

TEST_CASE("reader: every sample exactly once per epoch, with and without drop_last") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 203;
  fx.val_samples = 3;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  for (bool drop : {false, true}) {
    LoaderOptions o;
    o.batch_size = 32;
    o.sampler.drop_last = drop;
    o.sampler.epochs = 2;
    const Run run = Collect(*OpenLoader(tmp / "ds", o), &fx);
    std::map<uint64_t, std::multiset<uint64_t>> seen;  // epoch -> indices
    for (size_t k = 0; k < run.at.size(); ++k) {
      seen[run.at[k].epoch].insert(run.indices[k].begin(), run.indices[k].end());
      if (drop) CHECK(run.indices[k].size() == 32);
    }
    REQUIRE(seen.size() == 2);
    for (const auto& [epoch, s] : seen) {
      INFO("drop_last " << drop << " epoch " << epoch);
      CHECK(s.size() == (drop ? 192u : 200u));
      CHECK(std::set<uint64_t>(s.begin(), s.end()).size() == s.size());
      CHECK(*s.rbegin() < 200);  // never a "val" sample
    }
  }
}

TEST_CASE("reader: ranks get disjoint batches whose union is the epoch") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 240;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  std::multiset<uint64_t> all;
  size_t batches = 0;
  for (size_t rank = 0; rank < 3; ++rank) {
    LoaderOptions o;
    o.batch_size = 16;
    o.sampler.seed = 1;
    o.sampler.world_size = 3;
    o.sampler.rank = rank;
    const Run run = Collect(*OpenLoader(tmp / "ds", o), &fx);
    if (rank == 0) batches = run.indices.size();
    CHECK(run.indices.size() == batches);
    for (const auto& b : run.indices) all.insert(b.begin(), b.end());
  }
  CHECK(batches == 5);
  CHECK(all.size() == 240);
  CHECK(std::set<uint64_t>(all.begin(), all.end()).size() == 240);
}

TEST_CASE("reader: resuming from State() gives the batches of the uninterrupted run") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 150;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  for (SampleOrder order : {SampleOrder::kShuffle, SampleOrder::kShardWindowed, SampleOrder::kClassBalanced}) {
    LoaderOptions o;
    o.batch_size = 20;
    o.sampler.order = order;
    o.sampler.seed = 77;
    o.sampler.epochs = 3;
    const Run full = Collect(*OpenLoader(tmp / "ds", o));
    REQUIRE(full.indices.size() == 24);
    for (size_t cut : {0u, 3u, 8u, 13u, 23u, 24u}) {
      auto first = OpenLoader(tmp / "ds", o);
      const Run head = Collect(*first, nullptr, cut);
      o.sampler.resume = first->State();
      first.reset();
      const Run tail = Collect(*OpenLoader(tmp / "ds", o));
      o.sampler.resume.reset();
      INFO("order " << static_cast<int>(order) << " cut " << cut);
      REQUIRE(head.indices.size() + tail.indices.size() == full.indices.size());
      for (size_t k = 0; k < tail.indices.size(); ++k) {
        CHECK(tail.at[k] == full.at[cut + k]);
        CHECK(tail.indices[k] == full.indices[cut + k]);
        CHECK(tail.bytes[k] == full.bytes[cut + k]);
      }
    }
  }
}

TEST_CASE("reader: destroying the loader mid-epoch is clean, held batches stay valid") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 400;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 8;
  o.threads = 3;
  o.prefetch = 4;
  {
    auto loader = OpenLoader(tmp / "ds", o);  // destroyed with every slot in flight
  }
  std::shared_ptr<Batch> held;
  {
    auto loader = OpenLoader(tmp / "ds", o);
    for (int k = 0; k < 3; ++k) {
      auto b = loader->Next();
      REQUIRE(b.ok());
      held = *b;
    }
  }
  REQUIRE(held);
  CheckContents(*held, fx);  // the loader is gone; the batch still reads correctly
  held.reset();
}

TEST_CASE("reader: a caller holding every slot gets ResourceExhausted, not a deadlock") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 100;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 4;
  o.prefetch = 2;
  auto loader = OpenLoader(tmp / "ds", o);
  std::vector<std::shared_ptr<Batch>> held;
  for (int k = 0; k < 3; ++k) {
    auto b = loader->Next();
    REQUIRE(b.ok());
    held.push_back(*b);
  }
  auto blocked = loader->Next();
  CHECK(blocked.status().code() == StatusCode::kResourceExhausted);
  held.pop_back();
  auto next = loader->Next();
  REQUIRE(next.ok());
  CHECK((*next)->step == 3);
}

TEST_CASE("reader: with grow_ring a caller may hold any number of batches, each intact") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 100;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 4;
  o.prefetch = 1;
  o.grow_ring = true;
  o.sampler.order = SampleOrder::kSequential;
  auto loader = OpenLoader(tmp / "ds", o);
  const size_t first_ring = loader->ring_bytes();
  std::vector<std::shared_ptr<Batch>> held;
  for (int k = 0; k < 25; ++k) {  // every batch of the epoch, 12x the slots
    CHECK(loader->WaitForNext(std::chrono::milliseconds(10000)));
    auto b = loader->Next();
    INFO(b.status().ToString());
    REQUIRE(b.ok());
    REQUIRE(*b);
    held.push_back(*b);
  }
  CHECK(loader->ring_bytes() > first_ring);
  std::set<const void*> buffers;
  for (const auto& b : held) {
    CheckContents(*b, fx);  // nothing was overwritten while held
    buffers.insert(b->Find("image")->data);
  }
  CHECK(buffers.size() == held.size());
  CHECK(loader->WaitForNext(std::chrono::milliseconds(0)));  // the end answers at once
  auto end = loader->Next();
  REQUIRE(end.ok());
  CHECK(*end == nullptr);
}

TEST_CASE("reader: a batch_size beyond a rank's epoch allocates for that epoch only") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 100;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.prefetch = 1;
  o.sampler.world_size = 2;
  o.sampler.rank = 1;
  o.batch_size = 50;  // the rank's whole epoch
  const size_t fitting = OpenLoader(tmp / "ds", o)->ring_bytes();
  o.batch_size = size_t{1} << 40;
  auto loader = OpenLoader(tmp / "ds", o);
  CHECK(loader->ring_bytes() == fitting);
  CHECK(loader->batches_per_epoch() == 1);
  const Run run = Collect(*loader, &fx);
  REQUIRE(run.indices.size() == 1);
  CHECK(run.indices[0].size() == 50);
}

TEST_CASE("reader: WaitForNext reports a batch once it is decoded") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 64;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 8;
  auto loader = OpenLoader(tmp / "ds", o);
  for (int k = 0; k < 8; ++k) {
    while (!loader->WaitForNext(std::chrono::milliseconds(5))) {
    }
    auto b = loader->Next();
    REQUIRE(b.ok());
    REQUIRE(*b);
    CheckContents(**b, fx);
  }
  CHECK(loader->WaitForNext(std::chrono::milliseconds(0)));
}

TEST_CASE("reader: bad options are refused with the reason") {
  TempDir tmp;
  FixtureOptions fx;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.split = "nope";
  CHECK(Loader::Open(tmp / "ds", o).status().code() == StatusCode::kNotFound);
  o = LoaderOptions();
  o.fields = {"missing"};
  CHECK(Loader::Open(tmp / "ds", o).status().code() == StatusCode::kNotFound);
  o.fields = {"path"};
  auto s = Loader::Open(tmp / "ds", o).status();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("path") != std::string::npos);
  o = LoaderOptions();
  o.batch_size = 0;
  CHECK(Loader::Open(tmp / "ds", o).status().code() == StatusCode::kInvalidArgument);
  o = LoaderOptions();
  o.prefetch = 0;
  CHECK(Loader::Open(tmp / "ds", o).status().code() == StatusCode::kInvalidArgument);
  CHECK(Loader::Open(tmp / "missing", LoaderOptions()).status().code() != StatusCode::kOk);
  o = LoaderOptions();
  o.fields = {"label"};
  auto only = OpenLoader(tmp / "ds", o);
  auto b = only->Next();
  REQUIRE(b.ok());
  REQUIRE((*b)->fields.size() == 1);
  CHECK((*b)->fields[0].dtype == DType::kI64);
}

}  // namespace
}  // namespace shardify

namespace shardify {
namespace {

TEST_CASE("reader: two loaders share one opened dataset") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 160;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  auto opened = Dataset::Open(tmp / "ds");
  REQUIRE(opened.ok());
  std::shared_ptr<const Dataset> dataset(std::move(opened).value());
  LoaderOptions o;
  o.batch_size = 16;
  o.sampler.world_size = 2;
  auto first = Loader::Open(dataset, o);
  o.sampler.rank = 1;
  auto second = Loader::Open(dataset, o);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(&(*first)->dataset() == dataset.get());
  std::set<uint64_t> seen;
  for (Loader* l : {first->get(), second->get()}) {  // the second prefetches meanwhile
    const Run run = Collect(*l, &fx);
    CHECK(run.indices.size() == 5);
    for (const auto& b : run.indices) seen.insert(b.begin(), b.end());
  }
  CHECK(seen.size() == 160);
  CHECK(!Loader::Open(std::shared_ptr<const Dataset>(), o).ok());
}

}  // namespace
}  // namespace shardify
