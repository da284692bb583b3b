// shardtrain: train a model on a shard dataset, or predict with a checkpoint.
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "base/cli.h"
#include "format/types.h"
#include "trainer/cli.h"
#include "trainer/train.h"

namespace st = shardify::trainer;

namespace {

// Training's progress on stderr: a bar redrawn on a terminal, a line per update in a log.
shardify::cli::StatusLine g_progress(stderr, isatty(STDERR_FILENO) != 0);

void PrintProgress(const st::StepInfo& s, uint64_t epochs) {
  const double frac = s.steps_per_epoch ? double(s.step + 1) / double(s.steps_per_epoch) : 1.0;
  char text[256];
  std::snprintf(text, sizeof text, "epoch %llu/%llu %s %llu/%llu  loss %.4f  %.0f samples/s  data-wait %.1f%%",
                static_cast<unsigned long long>(s.epoch + 1), static_cast<unsigned long long>(epochs),
                shardify::cli::ProgressBar(frac, 24).c_str(), static_cast<unsigned long long>(s.step + 1),
                static_cast<unsigned long long>(s.steps_per_epoch), s.loss, s.samples_per_s,
                100.0 * s.data_wait_fraction);
  g_progress.Show(text);
}

void PrintEval(const std::string& split, uint64_t done, uint64_t total) {
  g_progress.Show("  evaluating " + split + ": " + std::to_string(done) + "/" + std::to_string(total) + " samples");
}

// Metrics printed as they come: all but the per-class Dice of label maps ("val_dice_1"; it
// is in metrics.jsonl), so multi-label runs show their classes by name.
bool Shown(const std::string& metric, const std::string& prefix) {
  const std::string dice = prefix + "dice_";
  return metric.rfind(dice, 0) != 0 || std::isalpha(static_cast<unsigned char>(metric[dice.size()])) != 0;
}

void PrintEpoch(const st::EpochRecord& r) {
  g_progress.End();
  std::fprintf(stderr, "  epoch %llu", static_cast<unsigned long long>(r.epoch));
  if (r.partial) std::fprintf(stderr, " (stopped after %llu steps)", static_cast<unsigned long long>(r.steps));
  std::fprintf(stderr, ": train_loss %.4f", r.train_loss);
  for (const auto& [k, v] : r.metrics) {
    if (Shown(k, "val_")) std::fprintf(stderr, "  %s %.4f", k.c_str(), v);
  }
  std::fprintf(stderr, "  (%.1f s)\n", r.seconds);
}

void PrintSummary(const st::TrainSummary& s) {
  std::printf(
      "epochs %llu (%llu steps), %.1f s training, %.1f s in all (%.1f s evaluating), %.0f samples/s, "
      "data-wait %.2f%% of step time, best %s %.4f\n",
      static_cast<unsigned long long>(s.epochs), static_cast<unsigned long long>(s.steps), s.seconds, s.wall_seconds,
      s.validation_seconds, s.samples_per_s, 100.0 * s.data_wait_fraction, s.best_metric_name.c_str(), s.best_metric);
  if (s.world_size > 1) {
    std::printf("%d ranks; gradient all-reduce %.2f%% of step time\n", s.world_size, 100.0 * s.allreduce_fraction);
  }
  for (const auto& [k, v] : s.metrics) {
    if (k.rfind("test_", 0) == 0 && Shown(k, "test_")) std::printf("%s %.4f\n", k.c_str(), v);
  }
}

int RunTrain(st::Command& c) {
  st::TrainOptions& t = c.train;
  if (!c.quiet) {
    t.on_step = [&t](const st::StepInfo& s) { PrintProgress(s, t.epochs); };
    t.on_epoch = PrintEpoch;
    t.on_eval = PrintEval;
  }
  t.on_note = [](const std::string& note) { std::fprintf(stderr, "shardtrain: %s\n", note.c_str()); };
  // Ctrl-C or SIGTERM ends training as --max-steps does (validation, last.pt, metrics).
  const std::atomic<bool>* stop = shardify::cli::InstallStopSignals();
  t.stop = stop;
  shardify::Result<st::TrainSummary> r = st::Train(t);
  g_progress.End();
  if (!r.ok()) {
    const std::string who = t.dist.world_size > 1 ? " (rank " + std::to_string(t.dist.rank) + ")" : "";
    std::fprintf(stderr, "shardtrain%s: %s\n", who.c_str(), r.status().ToString().c_str());
    return 1;
  }
  // A stop asked on any rank stops every rank: each then exits as stopped.
  const int code = stop->load() || r->stopped ? 130 : 0;
  if (r->rank != 0) return code;  // rank 0 reports the run's figures
  if (c.json)
    std::printf("%s\n", st::SummaryJson(*r).c_str());
  else
    PrintSummary(*r);
  return code;
}

int RunPredict(const st::Command& c) {
  shardify::Result<st::PredictSummary> r = st::Predict(c.predict);
  if (!r.ok()) {
    std::fprintf(stderr, "shardtrain: %s\n", r.status().ToString().c_str());
    return 1;
  }
  st::TrainSummary s;  // reuse the JSON writer for the metrics
  s.metrics = r->metrics;
  if (c.json) {
    std::printf("%s\n", st::SummaryJson(s).c_str());
  } else {
    std::printf("%llu samples -> %s\n", static_cast<unsigned long long>(r->samples), c.predict.out.c_str());
    for (const auto& [k, v] : r->metrics) std::printf("%s %.4f\n", k.c_str(), v);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  shardify::Result<st::Command> c =
      st::ParseCommandLine({argv + 1, argv + argc}, [](const char* name) { return std::getenv(name); });
  if (!c.ok()) {
    std::fprintf(stderr, "shardtrain: %s\nRun with --help for more information.\n", c.status().message().c_str());
    return 2;
  }
  try {
    switch (c->kind) {
      case st::Command::Kind::kHelp:
        std::fputs(c->help.c_str(), stdout);
        return 0;
      case st::Command::Kind::kTrain:
        return RunTrain(*c);
      case st::Command::Kind::kPredict:
        return RunPredict(*c);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardtrain: %s\n", e.what());
    return 1;
  }
  return 1;
}
