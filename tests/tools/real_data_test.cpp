// shardtool on real images: the first test images of Debian's Fashion-MNIST.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/tools/fixtures.h"
#include "tools/export.h"
#include "tools/grid.h"
#include "tools/info.h"
#include "tools/stats.h"
#include "tools/verify.h"

#ifdef SHARDIFY_TESTS_WITH_ITK
#include <itkImage.h>
#include <itkImageFileReader.h>
#endif

namespace shardify::tools {
namespace {

using nlohmann::json;
using test::TempDir;

struct RealData {
  TempDir tmp;
  std::string dir = tmp / "fmnist";
  test::Mnist data = test::ReadFashionMnist(300);
  RealData() { test::WriteFashionMnist(dir, data); }
};

TEST_CASE("tools: info, stats and verify agree with Fashion-MNIST read directly", "[tools]") {
  RealData r;
  std::ostringstream out;
  InfoOptions io;
  io.json = true;
  REQUIRE(RunInfo(r.dir, io, out).ok());
  const json info = json::parse(out.str());
  CHECK(info["samples"] == r.data.images.size());
  for (int c = 0; c < 10; ++c) {
    const auto n = std::count(r.data.labels.begin(), r.data.labels.end(), c);
    CHECK(info["class_counts"][info["classes"][c].get<std::string>()] == n);
  }
  double sum = 0, sq = 0;
  for (const auto& img : r.data.images) {
    for (uint8_t v : img) sum += v, sq += double(v) * v;
  }
  const double n = double(r.data.images.size() * 784), mean = sum / n;
  auto stats = ComputeStats(r.dir, StatsOptions{});
  REQUIRE(stats.ok());
  CHECK(stats->fields[0].channels[0].mean == Approx(mean));
  CHECK(stats->fields[0].channels[0].stddev() == Approx(std::sqrt(sq / n - mean * mean)));
  auto verify = VerifyDataset(r.dir, VerifyOptions{});
  REQUIRE(verify.ok());
  CHECK(verify->ok());
  CHECK(verify->blobs == r.data.images.size());
}

TEST_CASE("tools: info shows a dictionary and whether its frames keep their literals raw", "[tools]") {
  TempDir tmp;
  const std::string dir = tmp / "fmnist";
  test::WriteFashionMnist(dir, test::ReadFashionMnist(300), /*dictionary=*/true);
  std::ostringstream text, js;
  REQUIRE(RunInfo(dir, InfoOptions{}, text).ok());
  InfoOptions io;
  io.json = true;
  REQUIRE(RunInfo(dir, io, js).ok());
  const json field = json::parse(js.str())["fields"][0];
  CHECK(field["dictionary_bytes"].get<uint64_t>() > 0);
  // Real pictures: raw literals cost few bytes on them (the writer's rule), so they are chosen.
  CHECK(field["literals"] == "raw");
  CHECK(json::parse(js.str())["provenance"]["options"]["raw_literals"] == "image");
  CHECK_THAT(text.str(), Catch::Contains(" literals=raw") && Catch::Contains(" raw_literals=image"));
  // Without a dictionary nothing is said of literals.
  RealData plain;
  std::ostringstream none;
  REQUIRE(RunInfo(plain.dir, InfoOptions{}, none).ok());
  CHECK_THAT(none.str(), !Catch::Contains("literals"));
}

TEST_CASE("tools: grid and export on Fashion-MNIST", "[tools]") {
  RealData r;
  std::ostringstream out;
  GridOptions g;
  g.count = 16;
  g.json = true;
  REQUIRE(RunGrid(r.dir, r.tmp / "grid.png", g, out).ok());
  const json j = json::parse(out.str());
  const GridLayout layout = ComputeGridLayout(16, g.tile, 0);
  CHECK(j["width"] == layout.width);
  CHECK(j["height"] == layout.height);
  for (size_t k = 0; k < 16; ++k) {
    const uint64_t i = j["samples"][k];
    const std::string names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    CHECK(j["captions"][k] == names[r.data.labels[i]]);
  }
  const uint64_t i = 123;
  REQUIRE(RunExport(r.dir, i, r.tmp / "x.png", ExportOptions{}, out).ok());
#ifdef SHARDIFY_TESTS_WITH_ITK
  using Image = itk::Image<unsigned char, 2>;
  auto reader = itk::ImageFileReader<Image>::New();
  reader->SetFileName(r.tmp / "x.png");
  reader->Update();
  const unsigned char* px = reader->GetOutput()->GetBufferPointer();
  CHECK(std::equal(r.data.images[i].begin(), r.data.images[i].end(), px));
#endif
}

}  // namespace
}  // namespace shardify::tools
