#include "trainer/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "format/png.h"

namespace shardify::trainer {
namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

struct Color { uint8_t r, g, b; };

class Canvas {
 public:
  Canvas(uint32_t w, uint32_t h) { img_.width = w; img_.height = h; img_.pixels.assign(size_t{w} * h * 3, 255); }
  void Dot(int x, int y, Color c) {
    if (x < 0 || y < 0 || x >= static_cast<int>(img_.width) || y >= static_cast<int>(img_.height)) return;
    uint8_t* p = &img_.pixels[(size_t(y) * img_.width + size_t(x)) * 3];
    p[0] = c.r; p[1] = c.g; p[2] = c.b;
  }
  // Bresenham line, `thick` pixels wide.
  void Line(int x0, int y0, int x1, int y1, Color c, int thick = 1) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    for (int err = dx + dy;;) {
      for (int t = 0; t < thick; ++t) for (int u = 0; u < thick; ++u) Dot(x0 + t, y0 + u, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) { err += dy; x0 += sx; }
      if (e2 <= dx) { err += dx; y0 += sy; }
    }
  }
  RgbImage Take() { return std::move(img_); }

 private:
  RgbImage img_;
};

// Draws one series scaled from [lo, hi] into the plot box; NaN points break the line.
void Series(Canvas& c, const std::vector<double>& ys, double lo, double hi, int left, int top,
            int w, int h, Color color) {
  const size_t n = ys.size();
  int px = 0, py = 0;
  bool have = false;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(ys[i])) { have = false; continue; }
    const double fx = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.5;
    const double fy = hi > lo ? (ys[i] - lo) / (hi - lo) : 0.5;
    const int x = left + static_cast<int>(std::lround(fx * w));
    const int y = top + h - static_cast<int>(std::lround(std::clamp(fy, 0.0, 1.0) * h));
    if (have) c.Line(px, py, x, y, color, 2);
    for (int d = -2; d <= 2; ++d) c.Line(x - 2, y + d, x + 2, y + d, color);
    px = x; py = y; have = true;
  }
}

}  // namespace

double EpochRecord::Metric(const std::string& name) const {
  for (const auto& [k, v] : metrics) if (k == name) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string EpochJson(const EpochRecord& r) {
  nlohmann::ordered_json j;
  j["epoch"] = r.epoch;
  if (r.partial) {
    j["partial"] = true;
    j["steps"] = r.steps;
  }
  j["train_loss"] = Number(r.train_loss);
  j["val_loss"] = Number(r.val_loss);
  for (const auto& [k, v] : r.metrics) j[k] = Number(v);
  j["seconds"] = Number(r.seconds);
  j["samples_per_s"] = Number(r.samples_per_s);
  j["data_wait_fraction"] = Number(r.data_wait_fraction);
  j["lr"] = Number(r.lr);
  return j.dump();
}

Status AppendMetricsLine(const std::string& path, const EpochRecord& r) {
  std::ofstream out(path, std::ios::app);
  out << EpochJson(r) << '\n';
  out.flush();
  if (!out) return IOError("cannot append to metrics file " + path);
  return Status::Ok();
}

RgbImage RenderCurve(const std::vector<EpochRecord>& history, const std::string& metric,
                     uint32_t width, uint32_t height) {
  width = std::max<uint32_t>(width, 64);
  height = std::max<uint32_t>(height, 48);
  Canvas c(width, height);
  const int left = 40, top = 16, w = int(width) - 56, h = int(height) - 48;
  const Color grid{225, 225, 225}, axis{40, 40, 40};
  for (int k = 0; k <= 4; ++k) c.Line(left, top + h * k / 4, left + w, top + h * k / 4, grid);
  c.Line(left, top, left, top + h, axis);
  c.Line(left, top + h, left + w, top + h, axis);
  std::vector<double> train, val, met;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const EpochRecord& r : history) {
    train.push_back(r.train_loss);
    val.push_back(r.val_loss);
    met.push_back(r.Metric(metric));
    for (double v : {r.train_loss, r.val_loss}) {
      if (std::isfinite(v)) { lo = std::min(lo, v); hi = std::max(hi, v); }
    }
  }
  if (!(hi >= lo)) { lo = 0; hi = 1; }
  lo = std::min(lo, 0.0);
  Series(c, train, lo, hi, left, top, w, h, {31, 119, 180});
  Series(c, val, lo, hi, left, top, w, h, {255, 127, 14});
  Series(c, met, 0.0, 1.0, left, top, w, h, {44, 160, 44});
  return c.Take();
}

Status WriteCurvePng(const std::string& path, const std::vector<EpochRecord>& history,
                     const std::string& metric) {
  RgbImage img = RenderCurve(history, metric);
  return WritePngFile(path, img.pixels.data(), img.width, img.height, 3, 8)
      .WithContext("training curve");
}

}  // namespace shardify::trainer
