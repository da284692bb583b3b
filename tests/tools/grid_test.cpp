#include "tools/grid.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using test::BigEndian32;
using test::TempDir;

void CheckPngSize(const std::string& path, uint32_t width, uint32_t height) {
  const std::vector<uint8_t> png = test::ReadFile(path);
  REQUIRE(png.size() > 33);
  CHECK(png[0] == 0x89);
  CHECK(std::memcmp(png.data() + 1, "PNG", 3) == 0);
  CHECK(std::memcmp(png.data() + 12, "IHDR", 4) == 0);
  CHECK(BigEndian32(&png[16]) == width);
  CHECK(BigEndian32(&png[20]) == height);
  CHECK(png[24] == 8);  // bit depth
  CHECK(png[25] == 2);  // RGB
  CHECK(std::memcmp(png.data() + png.size() - 8, "IEND", 4) == 0);
}

// The RGB pixels of a PNG written by media/png.h (8-bit RGB, every row filtered "none").
std::vector<uint8_t> DecodeOwnPng(const std::string& path, uint32_t* width, uint32_t* height) {
  const std::vector<uint8_t> png = test::ReadFile(path);
  *width = BigEndian32(&png[16]);
  *height = BigEndian32(&png[20]);
  std::vector<uint8_t> z;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t length = BigEndian32(&png[at]);
    if (std::memcmp(&png[at + 4], "IDAT", 4) == 0) z.insert(z.end(), &png[at + 8], &png[at + 8 + length]);
    at += 12 + length;
  }
  const size_t stride = size_t(*width) * 3 + 1;
  std::vector<uint8_t> raw(stride * *height);
  uLongf size = static_cast<uLongf>(raw.size());
  REQUIRE(uncompress(raw.data(), &size, z.data(), static_cast<uLong>(z.size())) == Z_OK);
  REQUIRE(size == raw.size());
  std::vector<uint8_t> rgb;
  for (uint32_t y = 0; y < *height; ++y) {
    REQUIRE(raw[y * stride] == 0);
    rgb.insert(rgb.end(), raw.begin() + y * stride + 1, raw.begin() + (y + 1) * stride);
  }
  return rgb;
}

// Pixels unlike the background (the top-left corner, padding), coloured ones (R, G, B not
// all equal) among them, and distinct colours.
struct PixelCounts {
  size_t drawn = 0, coloured = 0, colours = 0, total = 0;
};
PixelCounts CountPixels(const std::vector<uint8_t>& rgb) {
  PixelCounts c;
  std::set<uint32_t> seen;
  for (size_t k = 0; k + 3 <= rgb.size(); k += 3) {
    const uint8_t r = rgb[k], g = rgb[k + 1], b = rgb[k + 2];
    c.drawn += r != rgb[0] || g != rgb[1] || b != rgb[2];
    c.coloured += r != g || g != b;
    seen.insert(uint32_t(r) << 16 | g << 8 | b);
    ++c.total;
  }
  c.colours = seen.size();
  return c;
}

TEST_CASE("tools: grid draws distinct seeded samples of a split", "[tools]") {
  const auto a = DrawSamples(100, 200, 10, 7);
  CHECK(a == DrawSamples(100, 200, 10, 7));
  CHECK(a != DrawSamples(100, 200, 10, 8));
  REQUIRE(a.size() == 10);
  CHECK(std::set<uint64_t>(a.begin(), a.end()).size() == 10);
  for (uint64_t v : a) CHECK((v >= 100 && v < 200));
  CHECK(DrawSamples(0, 3, 10, 1).size() == 3);
}

TEST_CASE("tools: grid writes a PNG of the layout's size with class captions", "[tools]") {
  TempDir tmp;
  test::WriteGray8(tmp / "ds");
  std::ostringstream out;
  GridOptions o;
  o.count = 5;
  o.split = "train";
  o.tile = 32;
  o.json = true;
  REQUIRE(RunGrid(tmp / "ds", tmp / "g.png", o, out).ok());
  const GridLayout g = ComputeGridLayout(5, 32, 0);
  CHECK(g.columns == 3);
  CHECK(g.rows == 2);
  CHECK(g.width == 3 * (32 + kGridPad) + kGridPad);
  CHECK(g.height == kGridLine + 2 * (32 + kGridCaption + kGridPad) + kGridPad);  // a title, no legend
  CheckPngSize(tmp / "g.png", g.width, g.height);
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["title"] == "ds, split train, field image: 5 of " + std::to_string(test::kTrain) + " samples, seed 0");
  CHECK(j["mask_labels"].empty());
  // The title's text in the top line, left of the sheet's middle (it is cut to the width).
  uint32_t w = 0, h = 0;
  const std::vector<uint8_t> rgb = DecodeOwnPng(tmp / "g.png", &w, &h);
  size_t title_ink = 0;
  for (uint32_t y = 0; y < kGridLine; ++y) {
    for (uint32_t x = 0; x < w; ++x) title_ink += rgb[(size_t(y) * w + x) * 3] == 235;
  }
  CHECK(title_ink > 30);
  REQUIRE(j["samples"].size() == 5);
  for (size_t k = 0; k < 5; ++k) {
    const uint64_t i = j["samples"][k];
    CHECK(i < test::kTrain);
    const int64_t label = test::LabelOf(i);
    CHECK(j["captions"][k] == (label < 0 ? "#" + std::to_string(i) : test::kClasses[label]));
  }
}

TEST_CASE("tools: grid draws masked RGB images and the middle slice of volumes", "[tools]") {
  TempDir tmp;
  test::WriteRgb16WithMask(tmp / "rgb");
  std::ostringstream out;
  GridOptions o;
  o.count = 100;
  o.json = true;
  REQUIRE(RunGrid(tmp / "rgb", tmp / "rgb.png", o, out).ok());
  const GridLayout g = ComputeGridLayout(test::kRgbSamples, o.tile, 0, /*legend=*/true);
  CHECK(g.legend_top == g.height - kGridLine);
  CheckPngSize(tmp / "rgb.png", g.width, g.height);
  // The legend names each label drawn (the fixture's masks hold 0, 1 and 2), in its colour.
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["mask_labels"] == nlohmann::json::array({1, 2}));
  out.str("");
  uint32_t w = 0, h = 0;
  {
    const std::vector<uint8_t> sheet = DecodeOwnPng(tmp / "rgb.png", &w, &h);
    std::set<uint32_t> legend_colours;
    for (uint32_t y = g.legend_top; y < h; ++y) {
      for (uint32_t x = 0; x < w; ++x) {
        const uint8_t* p = &sheet[(size_t(y) * w + x) * 3];
        legend_colours.insert(uint32_t(p[0]) << 16 | p[1] << 8 | p[2]);
      }
    }
    CHECK(legend_colours.count(230u << 16 | 25u << 8 | 75u));         // label 1
    CHECK(legend_colours.count(60u << 16 | 180u << 8 | 75u));         // label 2
    CHECK_FALSE(legend_colours.count(255u << 16 | 225u << 8 | 25u));  // label 3, not drawn
  }
  o.json = false;
  // RGB images with their masks in colour: most of each tile is drawn, in many colours.
  const PixelCounts rgb = CountPixels(DecodeOwnPng(tmp / "rgb.png", &w, &h));
  CHECK(rgb.drawn > rgb.total / 3);
  CHECK(rgb.coloured > rgb.total / 4);
  CHECK(rgb.colours > 100);
  test::WriteVolume(tmp / "vol", test::ReadNiftiSource(test::kNiftiPath));
  REQUIRE(RunGrid(tmp / "vol", tmp / "vol.png", o, out).ok());
  const GridLayout v = ComputeGridLayout(1, o.tile, 0);
  CheckPngSize(tmp / "vol.png", v.width, v.height);
  // The brain's middle slice: a gray picture of many levels over a good part of the tile.
  const PixelCounts vol = CountPixels(DecodeOwnPng(tmp / "vol.png", &w, &h));
  CHECK(vol.drawn > vol.total / 5);
  CHECK(vol.colours > 30);
}

}  // namespace
}  // namespace shardify::tools
