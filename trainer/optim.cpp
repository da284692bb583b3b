#include "trainer/optim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/checksum.h"
#include "base/file.h"

namespace shardify::trainer {
namespace {

using nlohmann::json;

json MetaToJson(const CheckpointMeta& m) {
  return json{
      {"version", 1},
      {"model",
       {{"name", m.model.name},
        {"in_channels", m.model.in_channels},
        {"num_classes", m.model.num_classes},
        {"height", m.model.height},
        {"width", m.model.width},
        {"unet_base_channels", m.model.unet_base_channels}}},
      {"task", m.task},
      {"classes", m.classes},
      {"mean", m.mean},
      {"stddev", m.stddev},
      {"resize", {m.resize_h, m.resize_w}},
      {"epochs_done", m.epochs_done},
      {"optimizer_step", m.optimizer_step},
      {"sampler", {m.sampler.epoch, m.sampler.step}},
      {"world_size", m.world_size},
      {"best_metric", m.best_metric},
      {"has_best", m.has_best},
      {"best_metric_name", m.best_metric_name},
      {"patch", m.patch},
      {"overlap", m.overlap},
      {"multi_label", m.multi_label},
      {"mask_classes", m.mask_classes},
      {"optimizer",
       {{"name", m.optimizer.name}, {"weight_decay", m.optimizer.weight_decay}, {"momentum", m.optimizer.momentum}}}};
}

CheckpointMeta MetaFromJson(const json& j) {  // throws json::exception on a bad document
  CheckpointMeta m;
  const json& md = j.at("model");
  m.model.name = md.at("name").get<std::string>();
  m.model.in_channels = md.at("in_channels").get<int64_t>();
  m.model.num_classes = md.at("num_classes").get<int64_t>();
  m.model.height = md.at("height").get<int64_t>();
  m.model.width = md.at("width").get<int64_t>();
  m.model.unet_base_channels = md.at("unet_base_channels").get<int64_t>();
  m.task = j.at("task").get<std::string>();
  m.classes = j.at("classes").get<std::vector<std::string>>();
  m.mean = j.at("mean").get<double>();
  m.stddev = j.at("stddev").get<double>();
  m.resize_h = j.at("resize").at(0).get<int64_t>();
  m.resize_w = j.at("resize").at(1).get<int64_t>();
  m.epochs_done = j.at("epochs_done").get<uint64_t>();
  m.optimizer_step = j.at("optimizer_step").get<int64_t>();
  m.sampler.epoch = j.at("sampler").at(0).get<uint64_t>();
  m.sampler.step = j.at("sampler").at(1).get<uint64_t>();
  if (j.contains("world_size"))
    m.world_size = std::max(1, j.at("world_size").get<int>());  // absent before distributed runs
  m.best_metric = j.at("best_metric").get<double>();
  m.has_best = j.at("has_best").get<bool>();
  m.best_metric_name = j.at("best_metric_name").get<std::string>();
  if (j.contains("patch")) m.patch = j.at("patch").get<std::vector<int64_t>>();  // absent before volumes
  if (j.contains("overlap")) m.overlap = j.at("overlap").get<double>();
  if (j.contains("multi_label")) m.multi_label = j.at("multi_label").get<bool>();  // absent: single-label
  if (j.contains("mask_classes")) m.mask_classes = j.at("mask_classes").get<std::vector<std::string>>();
  if (j.contains("optimizer")) {  // absent before it was recorded
    const json& o = j.at("optimizer");
    m.has_optimizer = true;
    m.optimizer.name = o.at("name").get<std::string>();
    m.optimizer.weight_decay = o.at("weight_decay").get<double>();
    m.optimizer.momentum = o.at("momentum").get<double>();
  }
  return m;
}

// LibTorch's messages carry a C++ backtrace after the first line.
std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

constexpr uint8_t kTrailerMagic[8] = {0x89, 'S', 'F', 'C', 0x0D, 0x0A, 0x1A, 0x0A};
constexpr size_t kTrailerSize = 16;
constexpr uint64_t kMaxCheckpointBytes = 64ull << 30;

// The archive bytes of checkpoint `path`, after checking its trailer.
Result<std::vector<uint8_t>> ReadArchive(const std::string& path, LegacyCheckpoint legacy) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, kMaxCheckpointBytes));
  const size_t n = bytes.size();
  if (n >= kTrailerSize && std::memcmp(bytes.data() + n - kTrailerSize, kTrailerMagic, 8) == 0) {
    uint64_t stored = 0;
    for (int i = 7; i >= 0; --i) stored = (stored << 8) | bytes[n - 8 + static_cast<size_t>(i)];
    const uint64_t actual = Checksum64(bytes.data(), n - kTrailerSize);
    if (stored != actual) {
      return Corruption("checkpoint " + path + ": checksum mismatch (the file is damaged): stored " +
                        std::to_string(stored) + ", computed " + std::to_string(actual));
    }
    bytes.resize(n - kTrailerSize);
    return bytes;
  }
  // Written before checkpoints had a trailer: a bare archive ends with the zip directory end.
  static const uint8_t kZipEnd[4] = {'P', 'K', 5, 6};
  const bool bare_archive = n >= 22 && std::memcmp(bytes.data() + n - 22, kZipEnd, 4) == 0;
  if (bare_archive && legacy == LegacyCheckpoint::kAccept) return bytes;
  if (bare_archive) {
    return Corruption("checkpoint " + path +
                      ": no checksum trailer: cut just before it, or written before checkpoints had one "
                      "(--legacy-checkpoint reads such a file without a check)");
  }
  return Corruption("checkpoint " + path + ": no checksum trailer (truncated, damaged, or not a checkpoint)");
}

// Loads `archive` from the checked bytes of `path`.
Status LoadArchive(const std::string& path, torch::serialize::InputArchive& archive, LegacyCheckpoint legacy) {
  ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, ReadArchive(path, legacy));
  archive.load_from(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return Status::Ok();
}

}  // namespace

Status CheckOptimizer(const OptimizerOptions& o) {
  if (o.name != "adam" && o.name != "adamw" && o.name != "sgd") {
    return InvalidArgument("unknown optimizer '" + o.name + "' (adam, adamw, sgd)");
  }
  if (!(o.lr > 0)) return InvalidArgument("learning rate must be > 0");
  if (!(o.weight_decay >= 0) || !(o.momentum >= 0)) return InvalidArgument("weight decay and momentum must be >= 0");
  return Status::Ok();
}

Result<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(const std::vector<torch::Tensor>& params,
                                                               const OptimizerOptions& o) {
  namespace optim = torch::optim;
  RETURN_IF_ERROR(CheckOptimizer(o));
  try {
    if (o.name == "adam") {
      return std::unique_ptr<optim::Optimizer>(
          std::make_unique<optim::Adam>(params, optim::AdamOptions(o.lr).weight_decay(o.weight_decay)));
    }
    if (o.name == "adamw") {
      return std::unique_ptr<optim::Optimizer>(
          std::make_unique<optim::AdamW>(params, optim::AdamWOptions(o.lr).weight_decay(o.weight_decay)));
    }
    if (o.name == "sgd") {
      return std::unique_ptr<optim::Optimizer>(std::make_unique<optim::SGD>(
          params, optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.momentum > 0).weight_decay(o.weight_decay)));
    }
  } catch (const std::exception& e) {
    return InvalidArgument("optimizer '" + o.name + "': " + e.what());
  }
  return Internal("optimizer '" + o.name + "' passed CheckOptimizer but is not built");
}

Status CheckSchedule(const ScheduleOptions& s) {
  if (s.name != "constant" && s.name != "cosine" && s.name != "onecycle") {
    return InvalidArgument("unknown schedule '" + s.name + "' (constant, cosine, onecycle)");
  }
  if (s.warmup_fraction < 0 || s.warmup_fraction >= 1) {
    return InvalidArgument("warmup fraction must be in [0, 1)");
  }
  if (!(s.start_div >= 1) || !(s.final_div >= 1)) return InvalidArgument("divisors must be >= 1");
  return Status::Ok();
}

// Cosine interpolation from a (t = 0) to b (t = 1).
static double Cosine(double a, double b, double t) {
  return b + (a - b) * 0.5 * (1 + std::cos(M_PI * std::min(std::max(t, 0.0), 1.0)));
}

double ScheduledLr(const ScheduleOptions& s, double peak, int64_t step) {
  const double total = static_cast<double>(std::max<int64_t>(s.total_steps, 1));
  const double warm = std::floor(s.warmup_fraction * total);
  const double x = static_cast<double>(step);
  if (s.name == "onecycle") {
    const double start = peak / s.start_div, end = start / s.final_div;
    if (x < warm) return Cosine(start, peak, x / warm);
    return Cosine(peak, end, (x - warm) / std::max(total - 1 - warm, 1.0));
  }
  if (s.name == "cosine") {
    if (x < warm) return peak * (x + 1) / warm;
    return Cosine(peak, peak / s.final_div, (x - warm) / std::max(total - 1 - warm, 1.0));
  }
  return peak;
}

void SetLr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

Status CheckResumeOptimizer(const std::string& path, const CheckpointMeta& meta, const OptimizerOptions& wanted) {
  if (!meta.has_optimizer) return Status::Ok();
  const OptimizerOptions& had = meta.optimizer;
  auto describe = [](const OptimizerOptions& o) {
    std::ostringstream s;
    s << "--optimizer " << o.name << " --weight-decay " << o.weight_decay;
    if (o.name == "sgd") s << " (momentum " << o.momentum << ")";
    return s.str();
  };
  const bool same = had.name == wanted.name && had.weight_decay == wanted.weight_decay &&
                    (had.name != "sgd" || had.momentum == wanted.momentum);
  if (same) return Status::Ok();
  return InvalidArgument("checkpoint " + path + " holds the state of " + describe(had) + ", but this run asks for " +
                         describe(wanted) + "; resume with the checkpoint's optimizer options, or start a new run");
}

Status SaveCheckpoint(const std::string& path, Model& model, const torch::optim::Optimizer* optimizer,
                      const CheckpointMeta& meta) {
  std::vector<uint8_t> bytes;
  try {
    torch::serialize::OutputArchive archive, weights, state;
    model.save(weights);
    archive.write("model", weights);
    if (optimizer != nullptr) {
      optimizer->save(state);
      archive.write("optimizer", state);
    }
    archive.write("meta", c10::IValue(MetaToJson(meta).dump()));
    archive.save_to([&bytes](const void* data, size_t n) {
      bytes.insert(bytes.end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n);
      return n;
    });
  } catch (const std::exception& e) {
    return IOError("writing checkpoint " + path + ": " + FirstLine(e.what()));
  }
  const uint64_t sum = Checksum64(bytes.data(), bytes.size());
  bytes.insert(bytes.end(), kTrailerMagic, kTrailerMagic + 8);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(sum >> (8 * i)));
  const Status written = WriteFileAtomic(path, bytes.data(), bytes.size());
  return written.ok() ? written : written.WithContext("writing checkpoint " + path);
}

Result<CheckpointMeta> ReadCheckpointMeta(const std::string& path, LegacyCheckpoint legacy) {
  try {
    torch::serialize::InputArchive archive;
    RETURN_IF_ERROR(LoadArchive(path, archive, legacy));
    c10::IValue v;
    if (!archive.try_read("meta", v) || !v.isString()) {
      return Corruption("checkpoint " + path + ": no 'meta' record");
    }
    return MetaFromJson(json::parse(v.toStringRef()));
  } catch (const std::exception& e) {
    return Corruption("checkpoint " + path + ": " + FirstLine(e.what()));
  }
}

Status LoadCheckpoint(const std::string& path, Model& model, torch::optim::Optimizer* optimizer,
                      LegacyCheckpoint legacy) {
  try {
    torch::serialize::InputArchive archive, weights, state;
    RETURN_IF_ERROR(LoadArchive(path, archive, legacy));
    archive.read("model", weights);
    model.load(weights);
    if (optimizer != nullptr) {
      if (!archive.try_read("optimizer", state)) {
        return Corruption("checkpoint " + path + ": no optimizer state to resume from");
      }
      try {
        optimizer->load(state);
      } catch (const std::exception& e) {  // a checkpoint that does not record its optimizer
        return InvalidArgument("checkpoint " + path +
                               ": its optimizer state does not fit this run's optimizer (was it "
                               "trained with another --optimizer?): " +
                               FirstLine(e.what()));
      }
    }
  } catch (const std::exception& e) {
    return Corruption("checkpoint " + path + ": " + FirstLine(e.what()));
  }
  return Status::Ok();
}

}  // namespace shardify::trainer
