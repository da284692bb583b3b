#include "media/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardify::media {
namespace {

constexpr Rgb kInk{40, 40, 40}, kGrid{228, 228, 228}, kWhite{255, 255, 255};
constexpr int kPad = 6;

// The plot box and the ranges it maps.
struct Frame {
  int left = 0, top = 0, w = 0, h = 0;
  size_t n = 0;  // x runs over 1..n
  double lo = 0, hi = 1, right_lo = 0, right_hi = 1;

  int X(double x) const {
    const double f = n > 1 ? (x - 1) / static_cast<double>(n - 1) : 0.5;
    return left + static_cast<int>(std::lround(f * w));
  }
  int Y(double v, bool right) const {
    const double a = right ? right_lo : lo, b = right ? right_hi : hi;
    const double f = b > a ? (v - a) / (b - a) : 0.5;
    return top + h - static_cast<int>(std::lround(std::clamp(f, 0.0, 1.0) * h));
  }
};

double Step(double span, int target) {
  const double raw = span / std::max(target, 1);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

void Series(Canvas& c, const Frame& f, const PlotSeries& s) {
  bool have = false;
  int px = 0, py = 0;
  for (size_t i = 0; i < s.y.size(); ++i) {
    if (!std::isfinite(s.y[i])) {
      have = false;
      continue;
    }
    const int x = f.X(static_cast<double>(i + 1)), y = f.Y(s.y[i], s.right_axis);
    if (have) c.Line(px, py, x, y, s.color, 2);
    c.FillRect(x - 2, y - 2, 5, 5, s.color);
    px = x, py = y, have = true;
  }
}

void YAxis(Canvas& c, const Frame& f, bool right, const std::string& label) {
  const double lo = right ? f.right_lo : f.lo, hi = right ? f.right_hi : f.hi;
  const std::vector<double> ticks = NiceTicks(lo, hi, 5);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  const int edge = right ? f.left + f.w : f.left;
  for (double t : ticks) {
    if (t < lo - 1e-9 * std::abs(step) || t > hi + 1e-9 * std::abs(step)) continue;
    const int y = f.Y(t, right);
    if (!right) c.Line(f.left + 1, y, f.left + f.w, y, kGrid);
    c.Line(edge + (right ? 1 : -4), y, edge + (right ? 4 : -1), y, kInk);
    const std::string text = TickLabel(t, step);
    const int tx = right ? edge + 7 : edge - 7 - Canvas::TextWidth(text.size()) + 1;
    c.Text(tx, y - kGlyphHeight / 2, text, kInk);
  }
  c.Line(edge, f.top, edge, f.top + f.h, kInk);
  const int lx = right ? static_cast<int>(c.width()) - kPad - kGlyphHeight : kPad;
  const int ly = f.top + f.h / 2 + Canvas::TextWidth(label.size()) / 2;
  c.Text(lx, ly, label, kInk, static_cast<size_t>(std::max(f.h, 0) / kGlyphAdvance), /*vertical=*/true);
}

void XAxis(Canvas& c, const Frame& f, const std::string& label) {
  c.Line(f.left, f.top + f.h, f.left + f.w, f.top + f.h, kInk);
  const double n = static_cast<double>(std::max<size_t>(f.n, 1));
  const double step = std::max(1.0, Step(std::max(n - 1, 1.0), 6));
  for (double t = 1; t <= n + 1e-9; t += step) {
    const int x = f.X(t);
    c.Line(x, f.top + f.h + 1, x, f.top + f.h + 4, kInk);
    const std::string text = TickLabel(t, 1);
    c.Text(x - Canvas::TextWidth(text.size()) / 2, f.top + f.h + 7, text, kInk);
  }
  c.Text(f.left + (f.w - Canvas::TextWidth(label.size())) / 2, f.top + f.h + 7 + kGlyphHeight + kPad, label, kInk);
}

// One row below the x axis' label, centred: outside the plot, it covers no line.
void Legend(Canvas& c, int y, const std::vector<PlotSeries>& series) {
  constexpr int kSwatch = 16, kGap = 4, kBetween = 14;
  int w = 0;
  for (const PlotSeries& s : series) w += kSwatch + kGap + Canvas::TextWidth(s.name.size()) + kBetween;
  int x = std::max(kPad, (static_cast<int>(c.width()) - (w - kBetween)) / 2);
  for (const PlotSeries& s : series) {
    c.FillRect(x, y + kGlyphHeight / 2 - 1, kSwatch, 3, s.color);
    c.Text(x + kSwatch + kGap, y, s.name, kInk);
    x += kSwatch + kGap + Canvas::TextWidth(s.name.size()) + kBetween;
  }
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) lo -= 0.5, hi += 0.5;
  const double step = Step(hi - lo, target);
  std::vector<double> out;
  const double first = std::floor(lo / step + 1e-9) * step;
  for (int k = 0; k < 64; ++k) {
    const double t = first + k * step;
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    if (t >= hi - step * 1e-9) break;
  }
  return out;
}

std::string TickLabel(double v, double step) {
  const int decimals = step >= 1 || step <= 0 ? 0 : std::min(9, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  char buf[64];
  if (std::abs(v) >= 1e6 || (v != 0 && std::abs(v) < 1e-4)) {
    std::snprintf(buf, sizeof buf, "%.2g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  }
  return buf;
}

RgbImage RenderLinePlot(const std::vector<PlotSeries>& series, const PlotAxes& axes, uint32_t width, uint32_t height) {
  width = std::max<uint32_t>(width, 160);
  height = std::max<uint32_t>(height, 120);
  Canvas c(width, height, kWhite);
  Frame f;
  bool right = false;
  double lo = INFINITY, hi = -INFINITY;
  for (const PlotSeries& s : series) {
    f.n = std::max(f.n, s.y.size());
    right = right || s.right_axis;
    for (double v : s.y) {
      if (s.right_axis || !std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!(hi >= lo)) lo = 0, hi = 1;
  if (axes.left_from_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  const std::vector<double> ticks = NiceTicks(lo, hi, 5);
  f.lo = ticks.front();
  f.hi = ticks.back();
  f.right_lo = axes.right_lo;
  f.right_hi = axes.right_hi;
  const int margin = 3 * kPad + kGlyphHeight + Canvas::TextWidth(7);
  f.left = margin;
  f.top = 2 * kPad + kGlyphHeight + kPad;
  f.w = static_cast<int>(width) - f.left - (right ? margin : 2 * kPad);
  const int below = 2 * kGlyphHeight + 3 * kPad + 6;  // ticks and the x axis' label
  f.h = static_cast<int>(height) - f.top - below - (kGlyphHeight + kPad);
  c.Text((static_cast<int>(width) - Canvas::TextWidth(axes.title.size())) / 2, kPad, axes.title, kInk);
  YAxis(c, f, false, axes.left_label);
  if (right) YAxis(c, f, true, axes.right_label);
  XAxis(c, f, axes.x_label);
  for (const PlotSeries& s : series) Series(c, f, s);
  Legend(c, f.top + f.h + below, series);
  return c.Take();
}

}  // namespace shardify::media
