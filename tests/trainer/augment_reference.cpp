// The C++ side of the cross-check between `shardtrain --aug nnunet` and Python's
// `shardify.transforms.NnUnet` (python/tests/test_transforms.py): draws the plan of one
// batch and applies it, exactly as the trainer does (the device path, here on the CPU) or
// sample by sample as the Loader's threads do (the host path), to arrays read from raw
// files.
//
// Usage:
//   augment_reference table
//       prints the transform table (reader/augment.cpp AugTransforms()) as JSON
//   augment_reference apply PATCH SHAPE SEED EPOCH STEP MARGIN P IMAGE MASK OUT [KEY=VALUE...]
//       PATCH "32,32" or "16,16,16"; SHAPE of the image "B,C,spatial..."; MARGIN 0 or 1;
//       P an --aug-p spec ("" for the defaults); IMAGE raw float32; MASK raw int64
//       [B, spatial...] or "-"; writes OUT.image (float32), OUT.mask (int64) and
//       OUT.plan.json, the drawn parameters. Options: label_pad=N, mask_mode=linear|nearest,
//       ignore_label=N, mask_image_channels=C:C:... (empty: none), path=device|host
//       (ApplyOnDevice on the batch, the default, or ApplySample per sample).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "trainer/augment.h"

namespace st = shardify::trainer;

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "augment_reference: %s\n", what.c_str());
  return 2;
}

std::vector<int64_t> Sizes(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

torch::Tensor ReadRaw(const std::string& path, std::vector<int64_t> shape, torch::ScalarType type) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  torch::Tensor t = torch::empty(shape, type);
  TORCH_CHECK(bytes.size() == t.nbytes(), path, ": ", bytes.size(), " bytes, expected ", t.nbytes());
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

void WriteRaw(const std::string& path, const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

nlohmann::json Table() {
  nlohmann::json rows = nlohmann::json::array();
  for (const st::AugTransformInfo& t : st::AugTransforms()) {
    rows.push_back({{"name", t.name},
                    {"probability", t.probability},
                    {"channel_probability", t.channel_probability},
                    {"lo", t.lo},
                    {"hi", t.hi},
                    {"split_at_one", t.split_at_one},
                    {"parameter", t.parameter}});
  }
  return rows;
}

nlohmann::json PlanJson(const st::AugmentPlan& p) {
  nlohmann::json applied = nlohmann::json::array();
  for (const std::vector<bool>& a : p.applied) applied.push_back(a);
  return {{"batch", p.batch},           {"channels", p.channels},     {"applied", applied},
          {"angles", p.angles},         {"scale", p.scale},           {"noise_sigma", p.noise_sigma},
          {"noise_seed", p.noise_seed}, {"blur_sigma", p.blur_sigma}, {"brightness", p.brightness},
          {"contrast", p.contrast},     {"low_res", p.low_res},       {"gamma_inverted", p.gamma_inverted},
          {"gamma", p.gamma},           {"mirror", p.mirror}};
}

// Sets the option named by "KEY=VALUE"; false for an unknown key or a bad value.
bool SetOption(const std::string& item, st::NnUnetAugmentOptions* o, bool* host) {
  const size_t eq = item.find('=');
  const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
  if (key == "path") {
    if (value != "host" && value != "device") return false;
    *host = value == "host";
  } else if (key == "label_pad") {
    o->label_pad = std::stoll(value);
  } else if (key == "ignore_label") {
    o->ignore_label = std::stoll(value);
  } else if (key == "mask_mode") {
    const auto mode = st::ParseMaskMode(value);
    if (!mode.ok()) return false;
    o->mask_mode = *mode;
  } else if (key == "mask_image_channels") {
    o->mask_image_channels.emplace();
    std::stringstream in(value);
    std::string c;
    while (std::getline(in, c, ':')) o->mask_image_channels->push_back(std::stoll(c));
  } else {
    return false;
  }
  return true;
}

// The plan applied by ApplySample, sample by sample: the mask as int32 in, int64 out.
st::ImageMask ApplyOnHost(const st::NnUnetAugment& aug, const st::ImageMask& io, const st::AugmentPlan& plan) {
  const int64_t batch = io.image.size(0), channels = io.image.size(1);
  for (size_t a = 0; a < aug.patch().size(); ++a) {
    TORCH_CHECK(io.image.size(int64_t(a) + 2) == aug.patch()[a] + 2 * aug.margin()[a], "the host path reads ",
                "the patch and its margin, not ", io.image.sizes());
  }
  std::vector<int64_t> shape = {batch, channels};
  shape.insert(shape.end(), aug.patch().begin(), aug.patch().end());
  const torch::Tensor image = io.image.contiguous();
  torch::Tensor out = torch::empty(shape), mask, out_mask;
  if (io.mask.defined()) {
    mask = io.mask.to(torch::kInt).contiguous();
    shape.erase(shape.begin() + 1);
    out_mask = torch::empty(shape, torch::kInt);
  }
  shardify::AugmentScratch scratch;
  for (int64_t b = 0; b < batch; ++b) {
    const shardify::Status s = aug.ApplySample(
        plan, b, channels, image[b].data_ptr<float>(), mask.defined() ? mask[b].data_ptr<int32_t>() : nullptr,
        out[b].data_ptr<float>(), mask.defined() ? out_mask[b].data_ptr<int32_t>() : nullptr, &scratch);
    TORCH_CHECK(s.ok(), s.ToString());
  }
  return {out, mask.defined() ? out_mask.to(torch::kLong) : torch::Tensor()};
}

int Apply(int argc, char** argv) {
  st::NnUnetAugmentOptions o;
  o.seed = std::stoull(argv[2]);
  o.margin = std::string(argv[5]) == "1";
  if (*argv[6] != '\0') {
    const shardify::Status s = st::ParseAugProbabilities(argv[6], &o);
    if (!s.ok()) return Fail(s.ToString());
  }
  bool host = false;
  for (int i = 10; i < argc; ++i) {
    if (!SetOption(argv[i], &o, &host)) return Fail(std::string("bad option '") + argv[i] + "'");
  }
  const std::vector<int64_t> patch = Sizes(argv[0]), shape = Sizes(argv[1]);
  auto aug = st::NnUnetAugment::Create(patch, o);
  if (!aug.ok()) return Fail(aug.status().ToString());
  st::ImageMask io;
  io.image = ReadRaw(argv[7], shape, torch::kFloat);
  if (std::string(argv[8]) != "-") {
    std::vector<int64_t> mask_shape = shape;
    mask_shape.erase(mask_shape.begin() + 1);
    io.mask = ReadRaw(argv[8], mask_shape, torch::kLong);
  }
  const st::AugmentPlan plan = aug->Draw(shape[0], shape[1], std::stoull(argv[3]), std::stoull(argv[4]));
  const st::ImageMask out = host ? ApplyOnHost(*aug, io, plan) : st::ApplyOnDevice(*aug, io, plan);
  const std::string base = argv[9];
  WriteRaw(base + ".image", out.image);
  if (out.mask.defined()) WriteRaw(base + ".mask", out.mask);
  nlohmann::json j = PlanJson(plan);
  j["margin"] = aug->margin();
  std::ofstream(base + ".plan.json") << j.dump();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 2 && std::string(argv[1]) == "table") {
      std::printf("%s\n", Table().dump().c_str());
      return 0;
    }
    if (argc >= 12 && std::string(argv[1]) == "apply") return Apply(argc - 2, argv + 2);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  return Fail(
      "usage: augment_reference table | apply PATCH SHAPE SEED EPOCH STEP MARGIN P IMAGE MASK OUT [KEY=VALUE...]");
}
