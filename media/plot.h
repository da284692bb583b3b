// Line plots of per-epoch series: axes with tick labels, a grid, a title and a legend (below
// the plot, where it covers no line), drawn with the Canvas font, so the image explains
// itself without a caption.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "media/canvas.h"

namespace shardify::media {

struct PlotSeries {
  std::string name;       // the legend's entry
  std::vector<double> y;  // y[i] is the value at x = i + 1; non-finite values leave a gap
  Rgb color;
  bool right_axis = false;  // scaled to the right axis instead of the left one
};

struct PlotAxes {
  std::string title;
  std::string x_label = "epoch";
  std::string left_label;
  std::string right_label;            // the right axis is drawn when a series uses it
  bool left_from_zero = true;         // the left axis includes 0
  double right_lo = 0, right_hi = 1;  // the right axis' fixed range
};

// About `target` evenly spaced round values (steps of 1, 2 or 5 times a power of ten)
// from at most `lo` to at least `hi`. lo == hi gives a unit range around it.
std::vector<double> NiceTicks(double lo, double hi, int target);
// `v` written with as many decimals as a tick step of `step` needs (e.g. 0.25 for 0.05).
std::string TickLabel(double v, double step);

// Draws the series over x = 1..n (n: the longest series). Sizes below 160x120 are raised
// to it. Series without a finite value are still listed in the legend.
RgbImage RenderLinePlot(const std::vector<PlotSeries>& series, const PlotAxes& axes, uint32_t width = 640,
                        uint32_t height = 360);

}  // namespace shardify::media
