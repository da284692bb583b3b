// The options of shardtrain's optimizers and learning-rate schedules, their checks, and the
// schedule itself (a pure function of the step), without LibTorch; optim.h makes the
// optimizers and reads and writes checkpoints.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace shardify::trainer {

struct OptimizerOptions {
  std::string name = "adam";  // adam | adamw | sgd
  double lr = 1e-3;           // peak learning rate
  double weight_decay = 0;    // adamw: decoupled decay; adam/sgd: L2
  double momentum = 0.9;      // sgd only (nesterov)
};

// Validates the name and the rates (lr > 0, weight decay and momentum >= 0).
Status CheckOptimizer(const OptimizerOptions& options);

// Learning rate as a pure function of the optimizer step, so its whole state is the step.
struct ScheduleOptions {
  std::string name = "constant";  // constant | cosine | onecycle
  int64_t total_steps = 1;        // optimizer steps of the whole run
  double warmup_fraction = 0.3;   // onecycle: share of steps rising to the peak;
                                  // cosine: linear warmup share (0 = none)
  double start_div = 25;          // onecycle: starts at peak / start_div
  double final_div = 1e4;         // onecycle: ends at peak / final_div; cosine: at peak / final_div
};

// Validates the name; total_steps is clamped to >= 1.
Status CheckSchedule(const ScheduleOptions& s);
// The learning rate at optimizer step `step` (0-based) for peak rate `peak`.
double ScheduledLr(const ScheduleOptions& s, double peak, int64_t step);

// Whether a checkpoint without the checksum trailer is read (see the file format in optim.h).
enum class LegacyCheckpoint { kRefuse, kAccept };

}  // namespace shardify::trainer
