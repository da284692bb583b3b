#include "trainer/optim.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace shardify::trainer {
namespace {

using nlohmann::json;

json MetaToJson(const CheckpointMeta& m) {
  return json{{"version", 1},
              {"model", {{"name", m.model.name}, {"in_channels", m.model.in_channels},
                         {"num_classes", m.model.num_classes}, {"height", m.model.height},
                         {"width", m.model.width}, {"unet_base_channels", m.model.unet_base_channels}}},
              {"task", m.task}, {"classes", m.classes}, {"mean", m.mean}, {"stddev", m.stddev},
              {"resize", {m.resize_h, m.resize_w}}, {"epochs_done", m.epochs_done},
              {"optimizer_step", m.optimizer_step},
              {"sampler", {m.sampler.epoch, m.sampler.step}}, {"best_metric", m.best_metric},
              {"has_best", m.has_best}, {"best_metric_name", m.best_metric_name},
              {"patch", m.patch}, {"overlap", m.overlap}};
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
  m.best_metric = j.at("best_metric").get<double>();
  m.has_best = j.at("has_best").get<bool>();
  m.best_metric_name = j.at("best_metric_name").get<std::string>();
  if (j.contains("patch")) m.patch = j.at("patch").get<std::vector<int64_t>>();  // absent before volumes
  if (j.contains("overlap")) m.overlap = j.at("overlap").get<double>();
  return m;
}

}  // namespace

Result<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(
    const std::vector<torch::Tensor>& params, const OptimizerOptions& o) {
  namespace optim = torch::optim;
  if (!(o.lr > 0)) return InvalidArgument("learning rate must be > 0");
  try {
    if (o.name == "adam") {
      return std::unique_ptr<optim::Optimizer>(std::make_unique<optim::Adam>(
          params, optim::AdamOptions(o.lr).weight_decay(o.weight_decay)));
    }
    if (o.name == "adamw") {
      return std::unique_ptr<optim::Optimizer>(std::make_unique<optim::AdamW>(
          params, optim::AdamWOptions(o.lr).weight_decay(o.weight_decay)));
    }
    if (o.name == "sgd") {
      return std::unique_ptr<optim::Optimizer>(std::make_unique<optim::SGD>(
          params, optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.momentum > 0)
                      .weight_decay(o.weight_decay)));
    }
  } catch (const std::exception& e) {
    return InvalidArgument("optimizer '" + o.name + "': " + e.what());
  }
  return InvalidArgument("unknown optimizer '" + o.name + "' (adam, adamw, sgd)");
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

Status SaveCheckpoint(const std::string& path, Model& model,
                      const torch::optim::Optimizer* optimizer, const CheckpointMeta& meta) {
  const std::string tmp = path + ".tmp";
  try {
    torch::serialize::OutputArchive archive, weights, state;
    model.save(weights);
    archive.write("model", weights);
    if (optimizer != nullptr) {
      optimizer->save(state);
      archive.write("optimizer", state);
    }
    archive.write("meta", c10::IValue(MetaToJson(meta).dump()));
    archive.save_to(tmp);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    return IOError("writing checkpoint " + path + ": " + e.what());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return IOError("renaming " + tmp + " to " + path);
  }
  return Status::Ok();
}

Result<CheckpointMeta> ReadCheckpointMeta(const std::string& path) {
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    c10::IValue v;
    if (!archive.try_read("meta", v) || !v.isString()) {
      return Corruption("checkpoint " + path + ": no 'meta' record");
    }
    return MetaFromJson(json::parse(v.toStringRef()));
  } catch (const std::exception& e) {
    return Corruption("checkpoint " + path + ": " + e.what());
  }
}

Status LoadCheckpoint(const std::string& path, Model& model, torch::optim::Optimizer* optimizer) {
  try {
    torch::serialize::InputArchive archive, weights, state;
    archive.load_from(path);
    archive.read("model", weights);
    model.load(weights);
    if (optimizer != nullptr) {
      if (!archive.try_read("optimizer", state)) {
        return Corruption("checkpoint " + path + ": no optimizer state to resume from");
      }
      optimizer->load(state);
    }
  } catch (const std::exception& e) {
    return Corruption("checkpoint " + path + ": " + e.what());
  }
  return Status::Ok();
}

}  // namespace shardify::trainer
