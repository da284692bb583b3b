#include "media/plot.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace shardify::media;

namespace {

size_t Count(const RgbImage& img, Rgb c, uint32_t y0 = 0, uint32_t y1 = UINT32_MAX) {
  size_t n = 0;
  for (uint32_t y = y0; y < std::min(y1, img.height); ++y) {
    for (uint32_t x = 0; x < img.width; ++x) {
      const uint8_t* p = &img.pixels[(size_t(y) * img.width + x) * 3];
      n += p[0] == c.r && p[1] == c.g && p[2] == c.b;
    }
  }
  return n;
}

// Pixels of ink (dark grey) in the columns [x0, x1) of rows [y0, y1).
size_t InkIn(const RgbImage& img, uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1) {
  size_t n = 0;
  for (uint32_t y = y0; y < y1; ++y) {
    for (uint32_t x = x0; x < x1; ++x) n += img.pixels[(size_t(y) * img.width + x) * 3] == 40;
  }
  return n;
}

}  // namespace

TEST_CASE("media: ticks are round numbers that cover the range") {
  CHECK(NiceTicks(0, 1, 5) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  const std::vector<double> t = NiceTicks(0.31, 2.87, 5);
  REQUIRE(t.size() >= 2);
  CHECK(t.front() <= 0.31);
  CHECK(t.back() >= 2.87);
  CHECK(t == std::vector<double>{0, 1, 2, 3});
  CHECK(NiceTicks(0, 0.93, 4) == std::vector<double>{0, 0.5, 1});
  CHECK(NiceTicks(3, 3, 4).size() >= 2);
  CHECK(NiceTicks(0, INFINITY, 5).empty());
  CHECK(TickLabel(0.4, 0.2) == "0.4");
  CHECK(TickLabel(0.25, 0.05) == "0.25");
  CHECK(TickLabel(12, 1) == "12");
  CHECK(TickLabel(1e30, 1e29) == "1e+30");
}

TEST_CASE("media: a plot draws its title, both axes' labels, the legend and every series") {
  const Rgb blue{31, 119, 180}, green{44, 160, 44};
  std::vector<PlotSeries> s = {{"loss", {2.0, 1.2, 0.8, NAN, 0.5}, blue, false},
                               {"accuracy", {0.5, 0.7, 0.8, 0.85, 0.9}, green, true}};
  PlotAxes axes;
  axes.title = "training curve";
  axes.left_label = "loss";
  axes.right_label = "accuracy";
  const RgbImage img = RenderLinePlot(s, axes, 400, 240);
  REQUIRE(img.pixels.size() == 400u * 240u * 3u);
  CHECK(Count(img, {40, 40, 40}, 0, 16) > 40);  // the title, above the plot
  CHECK(Count(img, blue) > 60);
  CHECK(Count(img, green) > 60);
  // The legend, one row below the x axis' label: each series' swatch there, none covering
  // the plot (the accuracy ends at its top right, where a legend inside would sit).
  CHECK(Count(img, blue, 226, 240) >= 16 * 3);
  CHECK(Count(img, green, 226, 240) >= 16 * 3);
  CHECK(InkIn(img, 150, 250, 226, 240) > 20);
  // The axes' labels, written vertically along the plot's middle rows at either edge.
  CHECK(InkIn(img, 0, 16, 40, 180) > 20);
  CHECK(InkIn(img, 384, 400, 40, 180) > 20);
  // Without a right-axis series, no right axis is drawn.
  s.pop_back();
  const RgbImage left_only = RenderLinePlot(s, axes, 400, 240);
  CHECK(InkIn(left_only, 0, 16, 40, 180) > 20);
  CHECK(InkIn(left_only, 384, 400, 40, 180) == 0);
}

TEST_CASE("media: plots of empty, single, constant and non-finite series do not fail") {
  PlotAxes axes;
  for (const std::vector<double>& y :
       std::vector<std::vector<double>>{{}, {1.0}, {3, 3, 3}, {NAN, INFINITY, -INFINITY}, {1e30, 1e-30}}) {
    const RgbImage img = RenderLinePlot({{"s", y, {1, 2, 3}, false}, {"r", y, {4, 5, 6}, true}}, axes, 10, 10);
    CHECK(img.width == 160);
    CHECK(img.height == 120);
    CHECK(img.pixels.size() == 160u * 120u * 3u);
  }
}
