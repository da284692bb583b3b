#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/checksum.h"
#include "base/file.h"
#include "base/parallel.h"
#include "base/strings.h"
#include "format/fields.h"
#include "format/manifest.h"
#include "storage/location.h"
#include "trainer/augment.h"
#include "trainer/distributed_internal.h"
#include "trainer/loop_internal.h"
#include "trainer/metrics.h"
#include "trainer/models.h"
#include "trainer/optim.h"
#include "trainer/setup_internal.h"
#include "trainer/train.h"
#include "trainer/transforms.h"

namespace shardify::trainer {

namespace {

using detail::HigherIsBetter;
using detail::kLabelPad;
using detail::Prepare;
using detail::Setup;
using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Mixes seed, epoch and step into one LibTorch seed, so dropout draws per step do not
// depend on what ran before (exact resume).
uint64_t StepSeed(uint64_t seed, uint64_t epoch, uint64_t step) {
  uint64_t z = seed ^ (epoch * 0x9E3779B97F4A7C15ull) ^ (step * 0xC2B2AE3D27D4EB4Full);
  z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
  return (z ^ (z >> 29)) & 0x7FFFFFFFFFFFull;
}

// Timings and loss of the epoch in progress.
struct EpochClock {
  double wait = 0, busy = 0;  // seconds blocked in Next(), seconds of whole steps
  double comm = 0;            // seconds blocked on the gradient all-reduce
  uint64_t samples = 0, steps = 0;
  torch::Tensor loss_sum;  // on the device, read at progress points only
  double Loss() const { return steps && loss_sum.defined() ? loss_sum.item<double>() / double(steps) : kNaN; }
};

class Trainer {
 public:
  Trainer(const TrainOptions& options, Setup& setup, std::shared_ptr<Model> model,
          std::unique_ptr<torch::optim::Optimizer> optimizer, std::unique_ptr<Loader> loader, detail::RankGroup* group,
          Clock::time_point start)
      : options_(options),
        setup_(setup),
        model_(std::move(model)),
        optimizer_(std::move(optimizer)),
        loader_(std::move(loader)),
        start_time_(start),
        last_progress_time_(start),
        group_(group) {
    schedule_ = options.schedule;
    const int64_t per_epoch = (int64_t(loader_->batches_per_epoch()) + options.accumulate - 1) / options.accumulate;
    schedule_.total_steps = std::max<int64_t>(per_epoch * int64_t(options.epochs), 1);
    augment_ = options.augment;
    augment_.seed = options.seed;
    optimizer_step_ = setup.resumed.optimizer_step;
    if (!options.resume.empty() && setup.resumed.world_size != setup.world_size)
      optimizer_step_ = per_epoch * int64_t(setup.resumed.epochs_done);
    if (group_) {
      grad_sync_ =
          std::make_unique<detail::GradSync>(*group_, model_->parameters(), size_t(options.dist.bucket_mb * (1 << 20)));
    }
    best_metric_ = setup.resumed.has_best ? setup.resumed.best_metric : kNaN;
    summary_.epochs = setup.resumed.epochs_done;
    summary_.best_metric_name = setup.best_name;
    summary_.device = setup.device.str();
    summary_.rank = setup.rank;
    summary_.world_size = setup.world_size;
  }

  Result<TrainSummary> Run() {
    model_->train();
    while (!Stopping()) {
      in_flight_.Release(2);
      const auto t0 = Clock::now();
      Result<std::shared_ptr<Batch>> next = loader_->Next();
      if (!next.ok()) return next.status().WithContext("training on " + setup_.ds->dir());
      std::shared_ptr<Batch> batch = std::move(next).value();
      const auto t1 = Clock::now();
      if (!batch) break;
      RETURN_IF_ERROR(Step(batch));
      ++summary_.steps;
      epoch_clock_.wait += Seconds(t1 - t0);
      epoch_clock_.busy += Seconds(Clock::now() - t0);
      last_batch_ = {batch->epoch, batch->step};
      const bool last = batch->step + 1 == loader_->batches_per_epoch();
      const bool due = last || (batch->step + 1) % std::max<uint64_t>(options_.progress_every, 1) == 0;
      // Every rank takes the same branches (SyncClock is a collective): `due` follows the
      // step count, and a report between those points follows rank 0's clock, which the
      // other ranks learn with the step's gradients, never from their own clocks.
      if (due || (group_ ? step_flags_.report : ClockDue())) {
        RETURN_IF_ERROR(SyncClock());
        if (options_.on_step && Leader()) Progress(*batch);
      }
      if (due) RETURN_IF_ERROR(CheckFinite());
      if (last) RETURN_IF_ERROR(EndEpoch(batch->epoch, false));
    }
    in_flight_.Release(0);
    if (epoch_clock_.steps > 0) {  // stopped within an epoch: report on the model as it is now
      RETURN_IF_ERROR(SyncClock());
      RETURN_IF_ERROR(CheckFinite());
      RETURN_IF_ERROR(EndEpoch(last_batch_.epoch, true));
    }
    return Finish();
  }

 private:
  // What the train batches hold: the Loader's augmented patches are float32 and normalized.
  detail::DataSpec TrainInputSpec() const {
    detail::DataSpec spec = setup_.spec;
    if (setup_.augment_in_loader) spec.mean = 0, spec.stddev = 1;
    return spec;
  }

  Status Step(const std::shared_ptr<Batch>& batch) {
    // Each rank's part of a step draws its own dropout and augmentation (one rank: the step).
    const uint64_t draw = batch->step * uint64_t(setup_.world_size) + uint64_t(setup_.rank);
    torch::manual_seed(StepSeed(options_.seed, batch->epoch, draw));
    ASSIGN_OR_RETURN(detail::Inputs in,
                     detail::BatchInputs(batch, TrainInputSpec(), setup_.device, Where(options_.train_split)));
    in_flight_.Add(batch, setup_.device);
    ImageMask io =
        !setup_.spec.patch.empty()
            ? ImageMask{in.image, in.target}
            : Augment({in.image, setup_.spec.segmentation ? in.target : torch::Tensor()}, augment_, batch->epoch, draw);
    if (setup_.nnunet && !setup_.augment_in_loader)
      io = ApplyOnDevice(*setup_.nnunet, std::move(io), batch->epoch, draw);
    torch::Tensor target = setup_.spec.segmentation ? io.mask : in.target;
    torch::Tensor loss;
    {
      detail::AutocastScope amp(options_.amp && setup_.device.is_cuda());
      loss = detail::TaskLoss(model_->forward(io.image), target, setup_.spec);
    }
    const bool epoch_end = batch->step + 1 == loader_->batches_per_epoch();
    // A stop request and rank 0's progress clock travel with the gradients (no collective
    // of their own), so every rank learns them after the same step.
    if (grad_sync_) grad_sync_->Arm(micro_step_ + 1 == options_.accumulate || epoch_end, {LocalStop(), ClockDue()});
    (loss / double(options_.accumulate)).backward();
    if (grad_sync_) {
      const auto c0 = Clock::now();
      RETURN_IF_ERROR(grad_sync_->Finish(&step_flags_));
      epoch_clock_.comm += Seconds(Clock::now() - c0);
      stop_agreed_ = stop_agreed_ || step_flags_.stop;
    }
    last_step_loss_ = loss.detach();
    epoch_clock_.loss_sum =
        epoch_clock_.loss_sum.defined() ? epoch_clock_.loss_sum + last_step_loss_ : last_step_loss_.clone();
    epoch_clock_.samples += batch->size();
    ++epoch_clock_.steps;
    if (++micro_step_ == options_.accumulate || epoch_end) {
      SetLr(*optimizer_, ScheduledLr(schedule_, options_.optimizer.lr, optimizer_step_));
      optimizer_->step();
      optimizer_->zero_grad();
      ++optimizer_step_;
      micro_step_ = 0;
    }
    return Status::Ok();
  }

  void Progress(const Batch& batch) {
    StepInfo info;
    info.epoch = batch.epoch;
    info.step = batch.step;
    info.steps_per_epoch = loader_->batches_per_epoch();
    info.loss = shown_clock_.Loss();
    info.last_step_loss = last_step_loss_.item<double>();
    info.samples_per_s = shown_clock_.busy > 0 ? double(shown_clock_.samples) / shown_clock_.busy : 0;
    info.data_wait_fraction = shown_clock_.busy > 0 ? shown_clock_.wait / shown_clock_.busy : 0;
    options_.on_step(info);
    last_progress_time_ = Clock::now();
  }

  // Whether the run ends before the next batch: max_steps (the same on every rank) is
  // reached, or a stop was asked (distributed: on some rank, and every rank knows).
  bool Stopping() {
    if (options_.max_steps > 0 && summary_.steps >= options_.max_steps) return true;
    summary_.stopped = group_ ? stop_agreed_ : LocalStop();
    return summary_.stopped;
  }
  bool LocalStop() const { return options_.stop != nullptr && options_.stop->load(); }

  // Whether this rank's clock asks for a progress report between the every-N-batches
  // points: only rank 0 reports.
  bool ClockDue() const {
    return options_.on_step && Leader() && Seconds(Clock::now() - last_progress_time_) >= options_.progress_seconds;
  }

  // Reports evaluation progress every progress_seconds, and at the end when it did before.
  detail::EvalProgress EvalCallback(const std::string& split) const {
    if (!options_.on_eval || !Leader()) return {};
    auto last = std::make_shared<std::pair<Clock::time_point, bool>>(Clock::now(), false);
    return [this, split, last](uint64_t done, uint64_t total) {
      const bool due = Seconds(Clock::now() - last->first) >= options_.progress_seconds;
      if (!due && !(done >= total && last->second)) return;
      *last = {Clock::now(), true};
      options_.on_eval(split, done, total);
    };
  }

  Result<detail::EvalResult> Evaluate(const std::string& split, const std::string& prefix) {
    const auto t0 = Clock::now();
    detail::EvalContext c;
    c.ds = setup_.ds;
    c.spec = setup_.spec;
    c.num_classes = setup_.model.num_classes;
    c.device = setup_.device;
    c.batch_size = options_.batch_size;
    c.threads = options_.threads;
    c.progress = EvalCallback(split);
    c.group = group_;
    c.nnunet = setup_.nnunet;
    Result<detail::EvalResult> r = detail::Evaluate(*model_, c, split, prefix);
    summary_.validation_seconds += Seconds(Clock::now() - t0);
    return r;
  }

  // A loss that is NaN or infinite anywhere in the epoch so far (the device-side sum
  // carries it) means the run diverged: it stops before anything is saved from it.
  Status CheckFinite() const {
    const Position& batch = last_batch_;
    const double loss = shown_clock_.Loss();
    if (std::isfinite(loss)) return Status::Ok();
    char lr[32];
    std::snprintf(lr, sizeof lr, "%g", options_.optimizer.lr);
    return InvalidArgument(std::string("training diverged: the training loss is ") +
                           (std::isnan(loss) ? "NaN"
                            : loss > 0       ? "+inf"
                                             : "-inf") +
                           " at epoch " + std::to_string(batch.epoch + 1) + ", step " + std::to_string(batch.step + 1) +
                           "; stopped (last.pt and best.pt keep the last finished epoch). Try a lower --lr than " + lr +
                           ", or a warm-up (--schedule onecycle)");
  }

  bool Leader() const { return setup_.rank == 0; }

  // The epoch so far over all ranks (shown_clock_): loss and samples summed, times averaged.
  Status SyncClock() {
    shown_clock_ = epoch_clock_;
    if (!group_) return Status::Ok();
    const double loss_sum = epoch_clock_.steps ? epoch_clock_.loss_sum.item<double>() : 0;
    ASSIGN_OR_RETURN(const std::vector<double> v,
                     group_->Sum({loss_sum, double(epoch_clock_.steps), double(epoch_clock_.samples), epoch_clock_.wait,
                                  epoch_clock_.busy, epoch_clock_.comm},
                                 "summing the training loss"));
    const double world = double(setup_.world_size);
    shown_clock_.loss_sum = torch::tensor(v[0], torch::kDouble);
    shown_clock_.steps = uint64_t(v[1]);
    shown_clock_.samples = uint64_t(v[2]);
    shown_clock_.wait = v[3] / world;
    shown_clock_.busy = v[4] / world;
    shown_clock_.comm = v[5] / world;
    return Status::Ok();
  }

  std::string Where(const std::string& split) const { return setup_.ds->dir() + ", split '" + split + "'"; }

  Status EndEpoch(uint64_t epoch, bool partial);
  Status SaveCheckpoints(bool improved);
  Result<TrainSummary> Finish();

  struct Position {
    uint64_t epoch = 0, step = 0;
  };

  // Times and samples of the finished epochs (shown_clock_'s, summed), for the summary.
  struct RunTotals {
    double wait = 0, busy = 0, comm = 0;
    uint64_t samples = 0;
  };

  // What the run trains, and how.
  const TrainOptions& options_;
  Setup& setup_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<Loader> loader_;
  ScheduleOptions schedule_;  // options_.schedule, its total_steps set to the run's optimizer steps
  AugmentOptions augment_;    // options_.augment, seeded with options_.seed
  detail::InFlightBatches in_flight_;

  // Where the run stands.
  int64_t optimizer_step_ = 0;  // optimizer steps taken, those before a resume included
  int micro_step_ = 0;          // batches accumulated since the last optimizer step
  Position last_batch_;         // the last batch trained
  torch::Tensor last_step_loss_;
  double best_metric_ = kNaN;  // of setup_.best_name; NaN: none yet
  TrainSummary summary_;

  // Clocks.
  Clock::time_point start_time_, last_progress_time_;
  EpochClock epoch_clock_;  // this rank's epoch in progress
  EpochClock shown_clock_;  // epoch_clock_ over all ranks at the last progress point
  RunTotals totals_;

  // Distributed training.
  detail::RankGroup* group_;                     // null: one process
  std::unique_ptr<detail::GradSync> grad_sync_;  // null: one process
  detail::StepFlags step_flags_;                 // what some rank flagged at the last step (group)
  bool stop_agreed_ = false;                     // some rank asked to stop, and every rank knows
};

// An epoch's end, or with `partial` the end of a run stopped within epoch `epoch`.
Status Trainer::EndEpoch(uint64_t epoch, bool partial) {
  EpochRecord r;
  r.epoch = epoch + 1;
  r.partial = partial;
  r.steps = epoch_clock_.steps;  // this rank's: the same on every rank
  r.train_loss = shown_clock_.Loss();
  r.seconds = shown_clock_.busy;
  r.samples_per_s = shown_clock_.busy > 0 ? double(shown_clock_.samples) / shown_clock_.busy : 0;
  r.data_wait_fraction = shown_clock_.busy > 0 ? shown_clock_.wait / shown_clock_.busy : 0;
  r.lr = ScheduledLr(schedule_, options_.optimizer.lr, std::max<int64_t>(optimizer_step_ - 1, 0));
  r.val_loss = kNaN;
  if (group_) RETURN_IF_ERROR(detail::AverageBuffers(*group_, *model_));
  if (setup_.has_val) {
    ASSIGN_OR_RETURN(detail::EvalResult ev, Evaluate(options_.val_split, "val"));
    r.val_loss = ev.loss;
    r.metrics = ev.metrics;
  }
  const double value = setup_.best_name == "train_loss" ? r.train_loss : r.Metric(setup_.best_name);
  const bool improved =
      !std::isnan(value) &&
      (std::isnan(best_metric_) || (HigherIsBetter(setup_.best_name) ? value > best_metric_ : value < best_metric_));
  if (improved) best_metric_ = value;
  totals_.wait += shown_clock_.wait;
  totals_.busy += shown_clock_.busy;
  totals_.comm += shown_clock_.comm;
  totals_.samples += shown_clock_.samples;
  epoch_clock_ = shown_clock_ = EpochClock();
  if (!partial) summary_.epochs = epoch + 1;
  summary_.history.push_back(r);
  if (!Leader()) return Status::Ok();  // rank 0 writes and reports
  RETURN_IF_ERROR(SaveCheckpoints(improved));
  RETURN_IF_ERROR(AppendMetricsLine(options_.out_dir + "/metrics.jsonl", r));
  RETURN_IF_ERROR(WriteCurvePng(options_.out_dir + "/curve.png", summary_.history, setup_.curve_metric));
  if (options_.on_epoch) options_.on_epoch(r);
  return Status::Ok();
}

Status Trainer::SaveCheckpoints(bool improved) {
  CheckpointMeta meta;
  meta.model = setup_.model;
  meta.task = setup_.spec.segmentation ? "segmentation" : "classification";
  meta.classes = setup_.classes;
  meta.mean = setup_.spec.mean;
  meta.stddev = setup_.spec.stddev;
  meta.resize_h = setup_.spec.resize_h;
  meta.resize_w = setup_.spec.resize_w;
  meta.epochs_done = summary_.epochs;  // a partial epoch resumes at its next step
  meta.multi_label = setup_.spec.multi_label;
  meta.mask_classes = setup_.spec.class_names;
  meta.optimizer_step = optimizer_step_;
  meta.sampler = loader_->State();
  meta.world_size = setup_.world_size;
  meta.has_best = !std::isnan(best_metric_);
  meta.best_metric = meta.has_best ? best_metric_ : 0;
  meta.best_metric_name = setup_.best_name;
  meta.patch = setup_.spec.patch;
  meta.overlap = setup_.spec.overlap;
  meta.has_optimizer = true;
  meta.optimizer = options_.optimizer;
  RETURN_IF_ERROR(SaveCheckpoint(options_.out_dir + "/last.pt", *model_, optimizer_.get(), meta));
  if (improved) RETURN_IF_ERROR(SaveCheckpoint(options_.out_dir + "/best.pt", *model_, nullptr, meta));
  return Status::Ok();
}

Result<TrainSummary> Trainer::Finish() {
  summary_.seconds = totals_.busy;
  summary_.samples_per_s = totals_.busy > 0 ? double(totals_.samples) / totals_.busy : 0;
  summary_.data_wait_fraction = totals_.busy > 0 ? totals_.wait / totals_.busy : 0;
  summary_.allreduce_fraction = totals_.busy > 0 ? totals_.comm / totals_.busy : 0;
  summary_.best_metric = best_metric_;
  if (!summary_.history.empty()) summary_.metrics = summary_.history.back().metrics;
  if (!summary_.history.empty()) summary_.metrics.emplace_back("train_loss", summary_.history.back().train_loss);
  if (!options_.test_split.empty()) {
    if (setup_.ds->manifest().FindSplit(options_.test_split) == nullptr) {
      return NotFound(setup_.ds->dir() + ": no split '" + options_.test_split + "' to test on");
    }
    ASSIGN_OR_RETURN(detail::EvalResult ev, Evaluate(options_.test_split, "test"));
    summary_.metrics.insert(summary_.metrics.end(), ev.metrics.begin(), ev.metrics.end());
  }
  summary_.wall_seconds = Seconds(Clock::now() - start_time_);
  return summary_;
}

Result<std::unique_ptr<Loader>> TrainLoader(const TrainOptions& o, const Setup& s) {
  LoaderOptions lo;
  lo.split = o.train_split;
  lo.fields = {s.spec.image_field, s.spec.target_field()};
  lo.batch_size = o.batch_size;
  lo.threads = o.threads;
  lo.prefetch = std::max<size_t>(o.prefetch, 1);
  lo.sampler.order = o.order;
  lo.sampler.seed = o.seed;
  lo.sampler.epochs = o.epochs;
  lo.sampler.repeats = o.repeats;
  lo.sampler.drop_last = o.drop_last;
  lo.sampler.rank = size_t(s.rank);
  lo.sampler.world_size = size_t(s.world_size);
  if (!o.resume.empty()) {
    std::string note;
    lo.sampler.resume = detail::ResumePoint(s.resumed, s.world_size, &note);
    if (!note.empty() && s.rank == 0 && o.on_note) o.on_note(note);
  }
  if (!s.spec.patch.empty()) {
    PatchOptions po;
    po.image_field = s.spec.image_field;
    po.label_field = s.spec.mask_field;
    po.locations_field = s.spec.mask_field + kFgLocationsSuffix;  // absent: uniform draws
    po.patch = Shape(s.spec.patch.begin(), s.spec.patch.end());
    po.foreground_fraction = o.foreground_fraction;
    po.label_pad = kLabelPad;
    if (s.nnunet && s.augment_in_loader) {
      lo.augment = LoaderOptions::Augment{s.nnunet->options(), s.spec.mean, s.spec.stddev};
    } else if (s.nnunet) {
      po.margin = Shape(s.nnunet->margin().begin(), s.nnunet->margin().end());
    }
    po.seed = s.rank == 0 ? o.seed : StepSeed(o.seed, ~uint64_t(0), uint64_t(s.rank));  // each rank its own draws
    lo.patch = po;
  }
  return Loader::Open(s.ds, lo);
}

void ConfigureTorch(const TrainOptions& o) {
  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(o.deterministic, /*warn_only=*/false);
  ctx.setDeterministicCuDNN(o.deterministic);
  ctx.setBenchmarkCuDNN(!o.deterministic);
  torch::manual_seed(o.seed);
}

// What the ranks compare before their first collective: the options, the dataset (its
// manifest's bytes, wherever it is mounted) and the checkpoint resumed from.
detail::AgreedValues AgreedRun(const TrainOptions& o, const Setup& s) {
  detail::AgreedValues agreed = detail::AgreedOptions(o);
  const std::vector<uint8_t> manifest = EncodeManifestFile(s.ds->manifest());
  char id[64];
  std::snprintf(id, sizeof id, "%llu samples, manifest xxh3 %016llx",
                static_cast<unsigned long long>(s.ds->num_samples()),
                static_cast<unsigned long long>(Checksum64(manifest.data(), manifest.size())));
  agreed.emplace_back("the dataset", id);
  if (!o.resume.empty()) {
    const CheckpointMeta& m = s.resumed;
    agreed.emplace_back("the checkpoint resumed", "after epoch " + std::to_string(m.epochs_done) + ", optimizer step " +
                                                      std::to_string(m.optimizer_step) + ", " +
                                                      std::to_string(m.world_size) + " rank(s)");
  }
  return agreed;
}

// Everything after joining the process group (null: one process); the run began at `start`.
Result<TrainSummary> TrainJoined(const TrainOptions& o, detail::RankGroup* group, Clock::time_point start) {
  Setup s;
  RETURN_IF_ERROR(Prepare(o, s));
  if (group) RETURN_IF_ERROR(group->Agree(AgreedRun(o, s)));
  ConfigureTorch(o);
  if (group) {
    RETURN_IF_ERROR(detail::RankDevice(o.dist, &s.device));
    s.rank = group->rank();
    s.world_size = group->world_size();
  }
  // The Loader opens before the model is built, moved, restored and broadcast, so that its
  // workers decode the first batches meanwhile. Otherwise the first step waits for a whole
  // batch's decode: the only data-wait of a run whose ring keeps up, as epoch boundaries
  // cost none (one Loader for all epochs, planning across them). It opens after
  // RankDevice, so that its pinned slots belong to this rank's device.
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, TrainLoader(o, s));
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, MakeModel(s.model));
  model->to(s.device);
  ASSIGN_OR_RETURN(std::unique_ptr<torch::optim::Optimizer> opt, MakeOptimizer(model->parameters(), o.optimizer));
  if (!o.resume.empty()) RETURN_IF_ERROR(LoadCheckpoint(o.resume, *model, opt.get(), o.legacy_checkpoint));
  if (group) RETURN_IF_ERROR(detail::BroadcastModel(*group, *model));
  Trainer trainer(o, s, std::move(model), std::move(opt), std::move(loader), group, start);
  return trainer.Run();
}

// A distributed run joins first, so that its ranks hear of each other's errors.
Result<TrainSummary> TrainImpl(const TrainOptions& o) {
  const auto start = Clock::now();
  if (o.dist.world_size <= 1) return TrainJoined(o, nullptr, start);
  RETURN_IF_ERROR(CheckTrainOptions(o));
  ASSIGN_OR_RETURN(torch::Device device, detail::PickDevice(o.device));
  RETURN_IF_ERROR(detail::RankDevice(o.dist, &device));
  ASSIGN_OR_RETURN(std::unique_ptr<detail::RankGroup> group, detail::RankGroup::Join(o.dist, device));
  Result<TrainSummary> r = Internal("not run");
  try {
    r = TrainJoined(o, group.get(), start);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    group->Leave(Internal(what.substr(0, what.find('\n'))));
    throw;
  }
  if (!r.ok()) {
    group->Leave(r.status());
    return r;
  }
  RETURN_IF_ERROR(group->Finish());
  return r;
}

nlohmann::json JsonNumber(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

std::string SummaryJson(const TrainSummary& s) {
  nlohmann::ordered_json j;
  j["epochs"] = s.epochs;
  j["steps"] = s.steps;
  j["seconds"] = JsonNumber(s.seconds);
  j["wall_seconds"] = JsonNumber(s.wall_seconds);
  j["validation_seconds"] = JsonNumber(s.validation_seconds);
  j["samples_per_s"] = JsonNumber(s.samples_per_s);
  j["data_wait_fraction"] = JsonNumber(s.data_wait_fraction);
  j["best_metric"] = JsonNumber(s.best_metric);
  j["best_metric_name"] = s.best_metric_name;
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [k, v] : s.metrics) m[k] = JsonNumber(v);
  j["metrics"] = m;
  j["device"] = s.device;
  j["rank"] = s.rank;
  j["world_size"] = s.world_size;
  j["allreduce_fraction"] = JsonNumber(s.allreduce_fraction);
  return j.dump();
}

Result<TrainSummary> Train(const TrainOptions& options) {
  try {
    if (options.threads == 0 && options.dist.local_world_size > 1) {  // the ranks of a machine share its cores
      TrainOptions o = options;
      o.threads = std::max<size_t>(1, CoreCount() / size_t(options.dist.local_world_size));
      return TrainImpl(o);
    }
    return TrainImpl(options);
  } catch (const std::exception& e) {
    return detail::FromTorchException("training on " + storage::ShownLocation(options.data_dir), e);
  }
}

}  // namespace shardify::trainer
