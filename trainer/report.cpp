#include "trainer/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "media/plot.h"
#include "media/png.h"

namespace shardify::trainer {
namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

double EpochRecord::Metric(const std::string& name) const {
  for (const auto& [k, v] : metrics)
    if (k == name) return v;
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

media::RgbImage RenderCurve(const std::vector<EpochRecord>& history, const std::string& metric, uint32_t width,
                            uint32_t height) {
  std::vector<media::PlotSeries> series = {{"train loss", {}, {31, 119, 180}, false},
                                           {"val loss", {}, {255, 127, 14}, false},
                                           {metric, {}, {44, 160, 44}, true}};
  for (const EpochRecord& r : history) {
    series[0].y.push_back(r.train_loss);
    series[1].y.push_back(r.val_loss);
    series[2].y.push_back(r.Metric(metric));
  }
  series.erase(std::remove_if(series.begin(), series.end(),
                              [](const media::PlotSeries& s) {
                                return std::none_of(s.y.begin(), s.y.end(), [](double v) { return std::isfinite(v); });
                              }),
               series.end());
  media::PlotAxes axes;
  axes.title = "training curve";
  axes.left_label = "loss";
  axes.right_label = metric;
  return media::RenderLinePlot(series, axes, width, height);
}

Status WriteCurvePng(const std::string& path, const std::vector<EpochRecord>& history, const std::string& metric) {
  const media::RgbImage img = RenderCurve(history, metric);
  return media::WritePngFile(path, img.pixels.data(), img.width, img.height, 3, 8).WithContext("training curve");
}

}  // namespace shardify::trainer
