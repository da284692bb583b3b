// Per-epoch records, the metrics file (JSON lines) and the training-curve PNG.
// No LibTorch here: these are plain data and pixels.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "media/canvas.h"

namespace shardify::trainer {

struct EpochRecord {
  uint64_t epoch = 0;                                   // 1-based
  double train_loss = 0;                                // mean over the epoch's steps
  double val_loss = 0;                                  // NaN when there is no validation split
  std::vector<std::pair<std::string, double>> metrics;  // e.g. {"val_accuracy", 0.87}
  double seconds = 0;                                   // wall time of the epoch's training steps
  double samples_per_s = 0;
  double data_wait_fraction = 0;  // time blocked on the loader / step time
  double lr = 0;                  // learning rate at the end of the epoch
  bool partial = false;           // the run stopped within this epoch (max_steps, Ctrl-C)
  uint64_t steps = 0;             // training batches of the record (this run's part of the epoch)
  // The value of metric `name`, or NaN.
  double Metric(const std::string& name) const;
};

// One CSV field as RFC 4180 writes it: as is, or in double quotes (with each quote doubled)
// when it holds a comma, a quote, a CR or an LF.
std::string CsvField(const std::string& text);

// One JSON object per line: {"epoch":1,"train_loss":...,"val_accuracy":...}. NaN -> null.
// A partial record also has "partial":true and "steps".
std::string EpochJson(const EpochRecord& r);
// Appends EpochJson(r) and a newline to `path` (created if missing).
Status AppendMetricsLine(const std::string& path, const EpochRecord& r);

// The training curve: train loss (blue) and validation loss (orange) on the left axis, from
// 0; metric `metric` (green) on a 0..1 right axis; epochs along x; a title, axis labels and
// a legend. Epochs with NaN are skipped.
media::RgbImage RenderCurve(const std::vector<EpochRecord>& history, const std::string& metric, uint32_t width = 640,
                            uint32_t height = 360);
// RenderCurve, written as a PNG file.
Status WriteCurvePng(const std::string& path, const std::vector<EpochRecord>& history, const std::string& metric);

}  // namespace shardify::trainer
