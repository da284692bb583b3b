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
#include "trainer/models.h"
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

struct Cli {
  st::TrainOptions train;
  st::PredictOptions predict;
  std::string order = "shuffle";
  bool json = false, quiet = false;
  std::vector<int64_t> resize, crop;
  std::string patch, aug, aug_p;
  std::string io = "mmap";
  bool legacy_checkpoint = false;
  std::optional<int> rank, world_size, local_rank, master_port;  // given: override the environment
  std::optional<std::string> master_addr;
};

void AddIo(CLI::App& app, Cli& c) {
  app.add_option("--io", c.io, "How shards are read: mmap, or pread (no page faults: NFS, FUSE)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mmap", "pread"}));
  shardify::cli::AddCacheOptions(app);
}

// For --resume and predict's checkpoint.
void AddLegacyCheckpoint(CLI::App& app, Cli& c) {
  app.add_flag("--legacy-checkpoint", c.legacy_checkpoint,
               "Accept a checkpoint without the checksum trailer (written before shardtrain had one),\n"
               "read without a check; otherwise such a file is refused as damaged");
}

st::LegacyCheckpoint Legacy(const Cli& c) {
  return c.legacy_checkpoint ? st::LegacyCheckpoint::kAccept : st::LegacyCheckpoint::kRefuse;
}

// The --model help: one line per entry of the model table.
std::string ModelHelp() {
  std::string help = st::ModelNameList(" | ");
  for (const st::ModelInfo& m : st::Models()) help += std::string("\n") + m.name + ": " + m.help;
  return help;
}

// Distributed runs: a launcher (torchrun, Slurm, a PyTorchJob, tools/launch.py) sets the
// environment; these flags override it.
void AddDistributed(CLI::App& app, Cli& c) {
  st::DistributedOptions& d = c.train.dist;
  const char* group = "Distributed (default: the launcher's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)";
  app.add_option("--rank", c.rank, "This process's rank, 0..world-size-1 (env RANK)")->group(group);
  app.add_option("--world-size", c.world_size, "Number of ranks (env WORLD_SIZE; default 1: no process group)")
      ->group(group);
  app.add_option("--local-rank", c.local_rank, "Rank on this machine: uses cuda:<local-rank> (env LOCAL_RANK)")
      ->group(group);
  app.add_option("--master-addr", c.master_addr, "Host of the rendezvous store (env MASTER_ADDR; default 127.0.0.1)")
      ->group(group);
  app.add_option("--master-port", c.master_port, "Port of the rendezvous store (env MASTER_PORT; default 29500)")
      ->group(group);
  app.add_option("--dist-backend", d.backend, "auto | gloo | nccl (auto: nccl on CUDA when built with it)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--dist-timeout", d.timeout_s,
                 "Seconds before a rank that does not answer (dead or hung) stops the others")
      ->capture_default_str()
      ->group(group);
  app.add_option("--bucket-mb", d.bucket_mb, "Gradient all-reduce bucket size in MiB")
      ->capture_default_str()
      ->group(group);
}

// The launcher's environment, then the flags given.
bool ResolveDistributed(Cli& c) {
  shardify::Result<st::DistributedOptions> d =
      st::DistributedFromEnvironment(c.train.dist, [](const char* name) { return std::getenv(name); });
  if (!d.ok()) {
    std::fprintf(stderr, "shardtrain: %s\n", d.status().message().c_str());
    return false;
  }
  if (c.rank) d->rank = *c.rank;
  if (c.world_size) d->world_size = *c.world_size;
  if (c.local_rank) d->local_rank = *c.local_rank;
  if (c.master_addr) d->master_addr = *c.master_addr;
  if (c.master_port) d->master_port = *c.master_port;
  c.train.dist = *d;
  return true;
}

void AddTrain(CLI::App& app, Cli& c) {
  st::TrainOptions& t = c.train;
  t.out_dir = "shardtrain-out";
  app.add_option("dataset", t.data_dir, "Shard dataset directory (made by shardify), or its http(s):// URL")
      ->required();
  app.add_option("-o,--out", t.out_dir, "Output directory: last.pt, best.pt, metrics.jsonl, curve.png")
      ->capture_default_str();
  app.add_option("-m,--model", t.model.name, ModelHelp())->capture_default_str();
  app.add_option("--patch", c.patch, "unet3d: patch size DxHxW, e.g. 64x64x64 (also the sliding window)");
  app.add_option("--fg-fraction", t.foreground_fraction,
                 "unet3d: share of each batch centred on foreground (nnU-Net's oversampling)")
      ->capture_default_str();
  app.add_option("--overlap", t.overlap, "unet3d: sliding-window overlap in validation, [0, 1)")->capture_default_str();
  app.add_option("--base-channels", t.model.unet_base_channels, "unet, unet3d: channels of the first level")
      ->capture_default_str();
  app.add_option("--classes", t.num_classes, "Number of classes (0 = from the manifest)")->capture_default_str();
  app.add_option("-e,--epochs", t.epochs, "Epochs")->capture_default_str();
  app.add_option("-b,--batch", t.batch_size, "Batch size per rank, 1..65536")->capture_default_str();
  app.add_option("--repeats", t.repeats,
                 "Passes over the training split per epoch (e.g. many patches from a few volumes)")
      ->capture_default_str();
  app.add_option("--optimizer", t.optimizer.name, "adam | adamw | sgd")->capture_default_str();
  app.add_option("--lr", t.optimizer.lr, "Peak learning rate")->capture_default_str();
  app.add_option("--weight-decay", t.optimizer.weight_decay, "Weight decay (decoupled for adamw)")
      ->capture_default_str();
  app.add_option("--schedule", t.schedule.name, "constant | cosine | onecycle")->capture_default_str();
  app.add_option("--warmup", t.schedule.warmup_fraction, "Share of steps warming up (onecycle, cosine)")
      ->capture_default_str();
  app.add_option("--accumulate", t.accumulate, "Batches per optimizer step (gradient accumulation)")
      ->capture_default_str();
  app.add_option("--device", t.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  app.add_option("--seed", t.seed, "Seed of order, initialization, dropout and augmentation")->capture_default_str();
  app.add_flag("--deterministic", t.deterministic, "Deterministic algorithms, no cuDNN benchmark");
  app.add_flag("!--no-amp", t.amp, "Disable bf16 mixed precision on CUDA (never used on CPU)");
  app.add_option("--threads", t.threads, "Decode threads (0 = all cores, shared by the ranks of a machine)")
      ->capture_default_str();
  app.add_option("--prefetch", t.prefetch, "Batches decoded ahead")->capture_default_str();
  AddIo(app, c);
  app.add_option("--order", c.order,
                 "sample order: " + shardify::SampleOrderNames(" | ") + " (windowed, balanced: short forms)")
      ->check([](const std::string& v) {
        return shardify::ParseSampleOrder(v) ? std::string() : "one of " + shardify::SampleOrderNames() + " is needed";
      })
      ->capture_default_str();
  app.add_option("--train-split", t.train_split, "Split to train on")->capture_default_str();
  app.add_option("--val-split", t.val_split, "Split validated every epoch (skipped when absent)")
      ->capture_default_str();
  app.add_option("--test-split", t.test_split, "Split evaluated once at the end (e.g. test)");
  app.add_option("--best-metric", t.best_metric, "Metric choosing best.pt (default val_accuracy / val_dice)");
  app.add_option("--resume", t.resume, "Continue from this last.pt (same options, more epochs allowed)");
  AddLegacyCheckpoint(app, c);
  app.add_option("--max-steps", t.max_steps,
                 "Stop after this many batches (0 = no limit); like Ctrl-C, a stop within an epoch\n"
                 "validates the model and writes last.pt, metrics.jsonl and curve.png");
  app.add_option("--progress-seconds", t.progress_seconds,
                 "Print progress at least this often, also between the every-50-batches lines")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--mean", t.mean, "Image mean for normalization (default: dataset statistics)");
  app.add_option("--std", t.stddev, "Image standard deviation (default: dataset statistics)");
  app.add_option("--resize", c.resize, "Resize to H W, each 1..16384 (also for validation)")->expected(2);
  app.add_option("--crop", c.crop, "Random crop or pad to H W, each 1..16384")->expected(2);
  app.add_flag("--flip-x", t.augment.flip_x, "Random left-right flips");
  app.add_flag("--flip-y", t.augment.flip_y, "Random top-bottom flips");
  app.add_option("--rotate", t.augment.rotate_deg, "Random rotation up to +-degrees");
  app.add_option("--scale", t.augment.scale, "Random zoom in [1-s, 1+s]");
  app.add_option("--translate", t.augment.translate, "Random shift up to this share of the size");
  app.add_option("--intensity-scale", t.augment.intensity_scale, "Random intensity factor in [1-a, 1+a]");
  app.add_option("--intensity-shift", t.augment.intensity_shift, "Random intensity offset in [-b, b]");
  app.add_option("--aug", c.aug,
                 "nnunet | none: nnU-Net's augmentation on the device, after the flags above\n"
                 "(default: nnunet for unet and unet3d, none for classifiers)");
  app.add_option("--aug-p", c.aug_p,
                 "Probabilities of nnU-Net's transforms, e.g. rotate=0.3,noise=0 or all=0,mirror=0.5:\n" +
                     st::AugTransformsText());
  app.add_flag("--json", c.json, "Print the final summary as JSON on stdout");
  app.add_flag("-q,--quiet", c.quiet, "No progress bar");
  AddDistributed(app, c);
}

void AddPredict(CLI::App& app, Cli& c) {
  st::PredictOptions& p = c.predict;
  app.add_option("checkpoint", p.checkpoint, "A last.pt or best.pt written by 'shardtrain train'")->required();
  app.add_option("dataset", p.data_dir, "Shard dataset directory, or its http(s):// URL")->required();
  app.add_option("-o,--out", p.out, "Classes: CSV file; segmentation: output shard dataset directory")->required();
  app.add_option("--split", p.split, "Split to predict")->capture_default_str();
  app.add_option("-b,--batch", p.batch_size, "Batch size, 1..65536 (volumes: sliding windows per pass, at most 8)")
      ->capture_default_str();
  app.add_option("--device", p.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  app.add_option("--threads", p.threads, "Decode threads (0 = all cores)")->capture_default_str();
  AddIo(app, c);
  AddLegacyCheckpoint(app, c);
  app.add_flag("--source-grid", p.source_grid,
               "Volumes: write each predicted mask on its case's source grid (undoing shardify's --crop and\n"
               "--spacing: probabilities resampled linearly, then argmax), with the source header and geometry");
  app.add_flag("--json", c.json, "Print the metrics as JSON on stdout");
}

int RunTrain(Cli& c) {
  st::TrainOptions& t = c.train;
  t.io = *shardify::ParseIoMode(c.io);  // checked by CLI11
  t.legacy_checkpoint = Legacy(c);
  t.order = *shardify::ParseSampleOrder(c.order);  // checked by CLI11
  if (c.resize.size() == 2) {
    t.augment.resize_h = c.resize[0];
    t.augment.resize_w = c.resize[1];
  }
  if (c.crop.size() == 2) {
    t.augment.crop_h = c.crop[0];
    t.augment.crop_w = c.crop[1];
  }
  if (!c.patch.empty()) {
    const shardify::Result<shardify::Shape> patch = shardify::ParseExtents(c.patch);
    if (!patch.ok() || patch->size() != 3) {
      std::fprintf(stderr, "shardtrain: --patch '%s': expected DxHxW with sizes >= 1, e.g. 64x64x64\n",
                   c.patch.c_str());
      return 2;
    }
    t.patch = *patch;
  }
  if (!c.aug.empty()) {
    const shardify::Result<st::AugPreset> aug = st::ParseAugPreset(c.aug);
    if (!aug.ok()) {
      std::fprintf(stderr, "shardtrain: --aug: %s\n", aug.status().message().c_str());
      return 2;
    }
    t.aug = *aug;
  }
  if (!c.aug_p.empty()) {
    if (t.aug == st::AugPreset::kNone || (t.aug == st::AugPreset::kAuto && !st::IsSegmentationModel(t.model.name))) {
      std::fprintf(stderr, "shardtrain: --aug-p sets nnU-Net's augmentation, which is off here; add --aug nnunet\n");
      return 2;
    }
    const shardify::Status s = st::ParseAugProbabilities(c.aug_p, &t.nnunet);
    if (!s.ok()) {
      std::fprintf(stderr, "shardtrain: --aug-p: %s\n", s.message().c_str());
      return 2;
    }
  }
  if (!ResolveDistributed(c)) return 2;
  const shardify::Status usage = st::CheckTrainOptions(t);
  if (!usage.ok()) {
    std::fprintf(stderr, "shardtrain: %s\n", usage.message().c_str());
    return 2;
  }
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

int RunPredict(Cli& c) {
  c.predict.io = *shardify::ParseIoMode(c.io);  // checked by CLI11
  c.predict.legacy_checkpoint = Legacy(c);
  const shardify::Status usage = st::CheckPredictOptions(c.predict);
  if (!usage.ok()) {
    std::fprintf(stderr, "shardtrain: %s\n", usage.message().c_str());
    return 2;
  }
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
  CLI::App app{
      "shardtrain: train LibTorch models on shard datasets (classification, 2D segmentation, and 3D "
      "segmentation on random patches with sliding-window validation), "
      "or predict with a checkpoint. Batches come from memory-mapped shards decoded by C++ threads; "
      "normalization and augmentation run on the device."};
  app.require_subcommand(1);
  Cli c;
  CLI::App* train = app.add_subcommand("train", "Train a model; writes checkpoints, metrics.jsonl and curve.png");
  CLI::App* predict =
      app.add_subcommand("predict", "Predict a split with a checkpoint (CSV of classes, or mask shards)");
  AddTrain(*train, c);
  AddPredict(*predict, c);
  shardify::cli::CheckIntegerOptions(app);
  app.footer(
      "Outputs of train: <out>/last.pt (resume with --resume), best.pt, metrics.jsonl, curve.png.\n"
      "Data-wait is the share of step time spent waiting for the next batch.\n"
      "Ctrl-C stops training after the current step, validates and writes the outputs (a second\n"
      "Ctrl-C, a second or more later, ends at once). Distributed, a stop on any rank stops all.\n"
      "Exit codes: 0 done, 1 failed, 2 bad usage, 130 stopped by Ctrl-C (outputs written).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the usage error
    return code == 0 ? 0 : 2;
  }
  try {
    return train->parsed() ? RunTrain(c) : RunPredict(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardtrain: %s\n", e.what());
    return 1;
  }
}
