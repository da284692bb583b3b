#include "trainer/cli.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <optional>
#include <string>

#include "base/cli.h"
#include "base/strings.h"
#include "format/dataset.h"
#include "format/types.h"
#include "reader/augment.h"
#include "reader/sampler.h"
#include "trainer/augment_options.h"
#include "trainer/distributed.h"
#include "trainer/model_table.h"
#include "trainer/optim_options.h"

namespace shardify::trainer {
namespace {

struct Cli {
  TrainOptions train;
  PredictOptions predict;
  std::string order = "shuffle";
  bool json = false, quiet = false;
  std::vector<int64_t> resize, crop;
  std::string patch, aug, aug_p, aug_mask_mode, aug_mask_image;
  std::string aug_ignore_label;  // text: a negative label is the usual one
  std::string io = "mmap";
  bool legacy_checkpoint = false;
  std::optional<int> rank, world_size, local_rank, master_port;  // given: override the environment
  std::optional<std::string> master_addr;
};

void AddIo(CLI::App& app, Cli& c) {
  app.add_option("--io", c.io, "How shards are read: mmap, or pread (no page faults: NFS, FUSE)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mmap", "pread"}));
  cli::AddCacheOptions(app);
}

// For --resume and predict's checkpoint.
void AddLegacyCheckpoint(CLI::App& app, Cli& c) {
  app.add_flag("--legacy-checkpoint", c.legacy_checkpoint,
               "Accept a checkpoint without the checksum trailer (written before shardtrain had one),\n"
               "read without a check; otherwise such a file is refused as damaged");
}

LegacyCheckpoint Legacy(const Cli& c) {
  return c.legacy_checkpoint ? LegacyCheckpoint::kAccept : LegacyCheckpoint::kRefuse;
}

// The --model help: one line per entry of the model table.
std::string ModelHelp() {
  std::string help = ModelNameList(" | ");
  for (const ModelInfo& m : Models()) help += std::string("\n") + m.name + ": " + m.help;
  return help;
}

// Distributed runs: a launcher (torchrun, Slurm, a PyTorchJob, scripts/launch.py) sets the
// environment; these flags override it.
void AddDistributed(CLI::App& app, Cli& c) {
  DistributedOptions& d = c.train.dist;
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
Status ResolveDistributed(Cli& c, const std::function<const char*(const char*)>& getenv) {
  Result<DistributedOptions> d = DistributedFromEnvironment(c.train.dist, getenv);
  if (!d.ok()) return InvalidArgument(d.status().message());
  if (c.rank) d->rank = *c.rank;
  if (c.world_size) d->world_size = *c.world_size;
  if (c.local_rank) d->local_rank = *c.local_rank;
  if (c.master_addr) d->master_addr = *c.master_addr;
  if (c.master_port) d->master_port = *c.master_port;
  c.train.dist = *d;
  return Status::Ok();
}

void AddTrain(CLI::App& app, Cli& c) {
  TrainOptions& t = c.train;
  t.out_dir = "shardtrain-out";
  app.add_option("dataset", t.data_dir,
                 "Shard dataset directory (made by shardify), or its s3:// or http(s):// location")
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
  app.add_option("--order", c.order, "sample order: " + SampleOrderNames(" | ") + " (windowed, balanced: short forms)")
      ->check([](const std::string& v) {
        return ParseSampleOrder(v) ? std::string() : "one of " + SampleOrderNames() + " is needed";
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
  app.add_option(
      "--aug-p", c.aug_p,
      "Probabilities of nnU-Net's transforms, e.g. rotate=0.3,noise=0 or all=0,mirror=0.5:\n" + AugTransformsText());
  app.add_option("--aug-mask-mode", c.aug_mask_mode,
                 "linear | nearest: how rotated and scaled masks are resampled (default linear, nnU-Net's:\n"
                 "each label's one-hot map linearly, the largest wins; multi-label masks: nearest)");
  app.add_option("--aug-ignore-label", c.aug_ignore_label,
                 "Label of mask voxels outside the data (patch padding, negative labels), one the loss\n"
                 "ignores (< 0 or >= classes); default: background 0, as nnU-Net");
  app.add_option("--aug-mask-image", c.aug_mask_image,
                 "Image channels set to 0 outside the labelled data, e.g. 0,2, or none (default: those\n"
                 "the dataset normalized in their nonzero region, provenance zscore_region)");
  app.add_flag("--json", c.json, "Print the final summary as JSON on stdout");
  app.add_flag("-q,--quiet", c.quiet, "No progress bar");
  AddDistributed(app, c);
}

void AddPredict(CLI::App& app, Cli& c) {
  PredictOptions& p = c.predict;
  app.add_option("checkpoint", p.checkpoint, "A last.pt or best.pt written by 'shardtrain train'")->required();
  app.add_option("dataset", p.data_dir, "Shard dataset directory, or its s3:// or http(s):// location")->required();
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

// The whole of `text` as an integer.
std::optional<int64_t> ParseInteger(const std::string& text) {
  int64_t v = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// "0,2" -> {0, 2}; "none" -> {}.
Result<std::vector<int64_t>> ParseChannels(const std::string& text) {
  std::vector<int64_t> out;
  if (text == "none") return out;
  for (const std::string& item : SplitComma(text)) {
    const std::optional<int64_t> c = ParseInteger(item);
    if (!c || *c < 0) return InvalidArgument("'" + text + "': expected channels such as 0,2, or none");
    out.push_back(*c);
  }
  return out;
}

// nnU-Net's augmentation options (--aug-p, --aug-mask-mode, --aug-ignore-label,
// --aug-mask-image), refused when the augmentation is off.
Status FinishNnUnetAugment(Cli& c) {
  TrainOptions& t = c.train;
  const char* given = !c.aug_p.empty()              ? "--aug-p"
                      : !c.aug_mask_mode.empty()    ? "--aug-mask-mode"
                      : !c.aug_ignore_label.empty() ? "--aug-ignore-label"
                      : !c.aug_mask_image.empty()   ? "--aug-mask-image"
                                                    : nullptr;
  if (given && (t.aug == AugPreset::kNone || (t.aug == AugPreset::kAuto && !IsSegmentationModel(t.model.name)))) {
    return InvalidArgument(std::string(given) + " sets nnU-Net's augmentation, which is off here; add --aug nnunet");
  }
  if (!c.aug_p.empty()) {
    const Status s = ParseAugProbabilities(c.aug_p, &t.nnunet);
    if (!s.ok()) return InvalidArgument("--aug-p: " + s.message());
  }
  if (!c.aug_mask_mode.empty()) {
    const Result<MaskMode> mode = ParseMaskMode(c.aug_mask_mode);
    if (!mode.ok()) return InvalidArgument("--aug-mask-mode: " + mode.status().message());
    t.nnunet.mask_mode = *mode;
  }
  if (!c.aug_ignore_label.empty()) {
    t.nnunet.ignore_label = ParseInteger(c.aug_ignore_label);
    if (!t.nnunet.ignore_label)
      return InvalidArgument("--aug-ignore-label '" + c.aug_ignore_label + "': not an integer");
  }
  if (!c.aug_mask_image.empty()) {
    const Result<std::vector<int64_t>> channels = ParseChannels(c.aug_mask_image);
    if (!channels.ok()) return InvalidArgument("--aug-mask-image " + channels.status().message());
    t.nnunet.mask_image_channels = *channels;
  }
  return Status::Ok();
}

// The train options from the flags, with the rules between them checked.
Status FinishTrain(Cli& c, const std::function<const char*(const char*)>& getenv) {
  TrainOptions& t = c.train;
  t.io = *ParseIoMode(c.io);  // checked by CLI11
  t.legacy_checkpoint = Legacy(c);
  t.order = *ParseSampleOrder(c.order);  // checked by CLI11
  if (c.resize.size() == 2) {
    t.augment.resize_h = c.resize[0];
    t.augment.resize_w = c.resize[1];
  }
  if (c.crop.size() == 2) {
    t.augment.crop_h = c.crop[0];
    t.augment.crop_w = c.crop[1];
  }
  if (!c.patch.empty()) {
    const Result<Shape> patch = ParseExtents(c.patch);
    if (!patch.ok() || patch->size() != 3) {
      return InvalidArgument("--patch '" + c.patch + "': expected DxHxW with sizes >= 1, e.g. 64x64x64");
    }
    t.patch = *patch;
  }
  if (!c.aug.empty()) {
    const Result<AugPreset> aug = ParseAugPreset(c.aug);
    if (!aug.ok()) return InvalidArgument("--aug: " + aug.status().message());
    t.aug = *aug;
  }
  RETURN_IF_ERROR(FinishNnUnetAugment(c));
  RETURN_IF_ERROR(ResolveDistributed(c, getenv));
  const Status usage = CheckTrainOptions(t);
  return usage.ok() ? usage : InvalidArgument(usage.message());
}

Status FinishPredict(Cli& c) {
  c.predict.io = *ParseIoMode(c.io);  // checked by CLI11
  c.predict.legacy_checkpoint = Legacy(c);
  const Status usage = CheckPredictOptions(c.predict);
  return usage.ok() ? usage : InvalidArgument(usage.message());
}

}  // namespace

Result<Command> ParseCommandLine(const std::vector<std::string>& args,
                                 const std::function<const char*(const char*)>& getenv) {
  CLI::App app{
      "shardtrain: train LibTorch models on shard datasets (classification, 2D segmentation, and 3D "
      "segmentation on random patches with sliding-window validation), "
      "or predict with a checkpoint. Datasets are directories, or s3:// or http(s):// locations read through a "
      "local cache. Batches come from memory-mapped shards decoded by C++ threads; normalization and "
      "augmentation run on the device (nnU-Net's on patches, when training on the CPU, in the decode threads)."};
  app.name("shardtrain");
  app.require_subcommand(1);
  Cli c;
  CLI::App* train = app.add_subcommand("train", "Train a model; writes checkpoints, metrics.jsonl and curve.png");
  CLI::App* predict =
      app.add_subcommand("predict", "Predict a split with a checkpoint (CSV of classes, or mask shards)");
  AddTrain(*train, c);
  AddPredict(*predict, c);
  cli::CheckIntegerOptions(app);
  app.footer(
      "Outputs of train: <out>/last.pt (resume with --resume), best.pt, metrics.jsonl, curve.png.\n"
      "Data-wait is the share of step time spent waiting for the next batch.\n"
      "Ctrl-C stops training after the current step, validates and writes the outputs (a second\n"
      "Ctrl-C, a second or more later, ends at once). Distributed, a stop on any rank stops all.\n"
      "Exit codes: 0 done, 1 failed, 2 bad usage, 130 stopped by Ctrl-C (outputs written).");
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  Command out;
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out.help = app.help();  // the subcommand's, when one was given
    return out;
  } catch (const CLI::CallForAllHelp&) {
    out.help = app.help("", CLI::AppFormatMode::All);
    return out;
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  if (train->parsed()) {
    RETURN_IF_ERROR(FinishTrain(c, getenv));
    out.kind = Command::Kind::kTrain;
  } else {
    RETURN_IF_ERROR(FinishPredict(c));
    out.kind = Command::Kind::kPredict;
  }
  out.train = std::move(c.train);
  out.predict = std::move(c.predict);
  out.json = c.json;
  out.quiet = c.quiet;
  return out;
}

}  // namespace shardify::trainer
