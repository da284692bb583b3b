// The decode path allocates per batch, never per sample (host augmentation included). A
// separate program because it replaces the global operator new (not built under the
// sanitizers, which own it).
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "format/dataset.h"
#include "reader/augment.h"
#include "reader/loader.h"
#include "tests/common/alloc_counter.h"
#include "tests/common/temp_dir.h"
#include "tests/reader/reader_fixtures.h"

namespace shardify {
namespace {

using testing::FixtureOptions;
using testing::TempDir;

TEST_CASE("reader: streaming allocates per batch, never per sample") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 3000;
  fx.side = 16;
  fx.shard_bytes = 1 << 20;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 250;
  o.threads = 2;
  o.sampler.epochs = 2;
  auto loader = Loader::Open(tmp / "ds", o);
  REQUIRE(loader.ok());
  REQUIRE((*loader)->Next().ok());  // warm: slots shaped, decoders created
  const uint64_t before = testing::AllocationCount();
  size_t batches = 0;
  while (true) {
    auto b = (*loader)->Next();
    REQUIRE(b.ok());
    if (!*b) break;
    ++batches;
  }
  const uint64_t allocations = testing::AllocationCount() - before;
  CHECK(batches == 23);
  // What the format's own calls allocate for the same samples, read one by one.
  auto dataset = Dataset::Open(tmp / "ds");
  REQUIRE(dataset.ok());
  Decoder decoder;
  std::vector<uint8_t> buffer(256);
  size_t failures = 0;
  uint64_t start = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the first pass maps the shards
    start = testing::AllocationCount();
    for (uint64_t i = 250; i < 3000; ++i) {  // no Catch2 macro inside: they allocate
      auto view = (*dataset)->Sample(i);
      failures += !view.ok() || !view->Decode(0, buffer.data(), buffer.size(), decoder).ok() ||
                  !view->int_value(1).ok() || !view->float_value(2).ok();
    }
  }
  const uint64_t format_per_2750 = testing::AllocationCount() - start;
  REQUIRE(failures == 0);
  const uint64_t format_share = format_per_2750 * (batches * 250) / 2750;
  INFO("loader allocations " << allocations << " for " << batches
                             << " batches of 250; the format's calls alone: " << format_share);
  // Beyond the format's calls: a Batch handle per batch and one order per epoch. The
  // format's own count varies a little with the digits of the indices (message strings),
  // so allow a slack far below one allocation per sample (5750 samples).
  CHECK(allocations <= format_share + 1000);
}

TEST_CASE("reader: an allocation that fails in a loader thread is an error naming the batch, not an abort") {
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 3000;
  fx.shard_bytes = 1 << 20;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 250;
  o.threads = 2;
  o.sampler.epochs = 2;
  auto loader = Loader::Open(tmp / "ds", o);
  REQUIRE(loader.ok());
  REQUIRE((*loader)->Next().ok());
  testing::FailAllocationsAbove(20 << 10);  // the second epoch's order (3000 x 8 bytes) cannot be had
  Status failed;
  for (int k = 0; k < 24 && failed.ok(); ++k) {  // no Catch2 macro inside: they allocate
    auto b = (*loader)->Next();
    if (!b.ok()) failed = b.status();
    if (b.ok() && !*b) break;
  }
  testing::FailAllocationsAbove(SIZE_MAX);
  INFO(failed.ToString());
  CHECK(failed.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(failed.message(), Catch::Contains("out of memory planning batch 12"));
}

TEST_CASE("reader: host augmentation with a scratch allocates for its first samples only") {
  NnUnetAugmentOptions o;
  REQUIRE(ParseAugProbabilities("all=1", &o).ok());
  o.mask_image_channels = std::vector<int64_t>{0};
  auto aug = NnUnetAugment::Create({12, 10, 14}, o);
  REQUIRE(aug.ok());
  int64_t in = 1, out = 12 * 10 * 14;
  for (size_t a = 0; a < 3; ++a) in *= aug->patch()[a] + 2 * aug->margin()[a];
  std::vector<float> image(size_t(2 * in)), image_out(size_t(2 * out));
  std::vector<int32_t> mask(static_cast<size_t>(in)), mask_out(static_cast<size_t>(out));
  for (size_t i = 0; i < mask.size(); ++i) {
    image[i] = image[i + mask.size()] = float(i % 13);
    mask[i] = int32_t(i % 7) - 1;
  }
  const AugmentPlan plan = aug->Draw(3, 2, 0, 0);
  AugmentScratch scratch;
  bool ok = true;  // no Catch2 macro inside: they allocate
  uint64_t allocations = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the first sizes the scratch
    const uint64_t before = testing::AllocationCount();
    for (int64_t b = 0; b < 3; ++b) {
      ok = ok &&
           aug->ApplySample(plan, b, 2, image.data(), mask.data(), image_out.data(), mask_out.data(), &scratch).ok();
    }
    allocations = testing::AllocationCount() - before;
  }
  CHECK(ok);
  CHECK(allocations == 0);
}

}  // namespace
}  // namespace shardify
