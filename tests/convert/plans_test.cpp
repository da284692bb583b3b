// nnU-Net v2 plans files (convert/preprocess/plans.h): written here in nnU-Net's schema, converted
// with --plans, and compared with the same conversion by the equivalent flags; each kind
// of bad plans file; the command line's refusals.
#include "convert/preprocess/plans.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/checksum.h"
#include "convert/programs/cli.h"
#include "format/elements.h"
#include "format/layout.h"
#include "tests/convert/convert_fixtures.h"

namespace shardify::convert {
namespace {

using namespace testing;
using Json = nlohmann::json;
namespace fs = std::filesystem;

// ITK's example brain MRI (i16 128x128x62 at x 2, y 2, z 3 mm, skull-stripped) with its
// 7-label segmentation, as an nnU-Net raw dataset whose one case has it as two channels.
std::string BrainDataset(const TempDir& dir) {
  const std::string src = dir / "Dataset042_Brain", data = ItkDataDir() + "/";
  MakeDirs(src + "/imagesTr");
  MakeDirs(src + "/labelsTr");
  for (const char* c : {"0000", "0001"})
    fs::copy_file(data + "KmeansTest_T1UCharRaw.nii.gz", src + "/imagesTr/brain_" + c + ".nii.gz");
  fs::copy_file(data + "KmeansTest_T1KmeansPrelimSegmentation.nii.gz", src + "/labelsTr/brain.nii.gz");
  WriteText(src + "/dataset.json",
            R"({"channel_names": {"0": "CT", "1": "T1"}, "labels": {"background": 0, "a": 1, "b": 2, "c": 3,
                "d": 4, "e": 5, "f": 6}, "numTraining": 1, "file_ending": ".nii.gz"})");
  return src;
}

Json Kwargs(bool seg, int order) {
  return {{"is_seg", seg}, {"order", order}, {"order_z", 0}, {"force_separate_z", nullptr}};
}

// A plans file as nnUNetv2_plan_and_preprocess writes one for the brain at a target of x 4,
// y 2.5, z 3 mm: x is the coarsest axis, so transpose_forward puts it first ([2, 0, 1]: its
// axes are x, z, y). "3d_linear" inherits from 3d_fullres and resamples linearly, masks
// by nearest neighbour (fast, and a test of inheritance and of both orders).
Json BrainPlans(const std::vector<double>& ct) {
  Json fullres = {{"data_identifier", "nnUNetPlans_3d_fullres"},
                  {"preprocessor_name", "DefaultPreprocessor"},
                  {"batch_size", 2},
                  {"patch_size", {24, 32, 40}},
                  {"median_image_size_in_voxels", {32, 42, 51}},
                  {"spacing", {4.0, 3.0, 2.5}},
                  {"normalization_schemes", {"CTNormalization", "ZScoreNormalization"}},
                  {"use_mask_for_norm", {false, true}},
                  {"resampling_fn_data", "resample_data_or_seg_to_shape"},
                  {"resampling_fn_seg", "resample_data_or_seg_to_shape"},
                  {"resampling_fn_data_kwargs", Kwargs(false, 3)},
                  {"resampling_fn_seg_kwargs", Kwargs(true, 1)},
                  {"resampling_fn_probabilities", "resample_data_or_seg_to_shape"},
                  {"resampling_fn_probabilities_kwargs", Kwargs(false, 1)},
                  {"architecture",
                   {{"network_class_name",
                     "dynamic_network_architectures.architectures.unet."
                     "PlainConvUNet"}}},
                  {"batch_dice", false}};
  Json props = Json::object();
  for (const char* c : {"0", "1"}) {
    props[c] = {{"max", 255.0},
                {"mean", ct[2]},
                {"median", 90.0},
                {"min", 0.0},
                {"percentile_00_5", ct[0]},
                {"percentile_99_5", ct[1]},
                {"std", ct[3]}};
  }
  return {{"dataset_name", "Dataset042_Brain"},
          {"plans_name", "nnUNetPlans"},
          {"original_median_spacing_after_transp", {2.0, 3.0, 2.0}},
          {"original_median_shape_after_transp", {128, 62, 128}},
          {"image_reader_writer", "SimpleITKIO"},
          {"transpose_forward", {2, 0, 1}},
          {"transpose_backward", {1, 2, 0}},
          {"configurations",
           {{"2d", {{"spacing", {3.0, 2.5}}, {"patch_size", {64, 64}}}},
            {"3d_fullres", fullres},
            {"3d_linear",
             {{"inherits_from", "3d_fullres"},
              {"resampling_fn_data_kwargs", Kwargs(false, 1)},
              {"resampling_fn_seg_kwargs", Kwargs(true, 0)}}}}},
          {"experiment_planner_used", "ExperimentPlanner"},
          {"label_manager", "LabelManager"},
          {"foreground_intensity_properties_per_channel", props}};
}

std::string WriteJson(const std::string& path, const Json& j) {
  WriteText(path, j.dump(4));
  return path;
}

ConvertOptions Parse(const std::vector<std::string>& args) {
  auto c = ParseCommandLine(args);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return c->options;
}

// Field `name` of sample 0, decoded (chunked or not).
std::vector<uint8_t> Decoded(const Readback& rb, const std::string& name) {
  auto v = rb.ds->Sample(0);
  REQUIRE(v.ok());
  const auto f = static_cast<size_t>(rb.Field(name));
  auto n = v->raw_size(f);
  REQUIRE(n.ok());
  std::vector<uint8_t> out(*n);
  Decoder dec;
  REQUIRE(v->Decode(f, out.data(), out.size(), dec).ok());
  return out;
}

// Applies the plans file `path` (configuration `name`) to default options.
Status Apply(const std::string& path, const std::string& name = "3d_fullres") {
  ConvertOptions o;
  o.preprocess.plans_file = path;
  o.preprocess.plans_configuration = name;
  return ApplyPlans(&o);
}

}  // namespace

TEST_CASE("plans: a plans file converts as its flags would, voxel for voxel, and the provenance names it") {
  TempDir dir;
  const std::string src = BrainDataset(dir);
  // The flags that say what the plans say, in shardify's axes (x, y, z named; patch z, y, x).
  auto flags =
      RunConvert(src, dir / "flags",
                 Parse({"s", "-o", "d", "--crop", "nonzero", "--spacing", "x=4,y=2.5,z=3", "--normalize", "ct,zscore",
                        "--resample-image", "linear", "--resample-mask", "nearest", "--patch-size", "32x40x24"}));
  INFO(flags.status().ToString());
  REQUIRE(flags.ok());
  const Readback want = Open(dir / "flags");
  const Manifest& wm = want.ds->manifest();
  REQUIRE(ProvenanceOption(wm, "zscore_region") == "nonzero");  // the brain: cropping keeps 46%
  std::vector<double> norm(8);  // image.normalization: per channel clip low, high, mean, std
  std::memcpy(norm.data(), want.Array(0, "image.normalization").data(), 64);
  // The plans carry the statistics the flags measured (as nnU-Net's fingerprint would),
  // channel 1's too, which draws its own values though it is z-scored.
  Json brain = BrainPlans({norm[0], norm[1], norm[2], norm[3]});
  const Json measured = Json::parse(ProvenanceOption(wm, "ct_statistics")).at(1);
  Json& second = brain["foreground_intensity_properties_per_channel"]["1"];
  second["percentile_00_5"] = measured["clip"][0], second["percentile_99_5"] = measured["clip"][1];
  second["mean"] = measured["mean"], second["std"] = measured["std"];
  const std::string plans = WriteJson(dir / "nnUNetPlans.json", brain);

  auto got = RunConvert(src, dir / "plans", Parse({"s", "-o", "d", "--plans", plans, "--configuration", "3d_linear"}));
  INFO(got.status().ToString());
  REQUIRE(got.ok());
  const Readback rb = Open(dir / "plans");
  const Manifest& m = rb.ds->manifest();
  REQUIRE(m.fields == wm.fields);
  CHECK(m.fields[rb.Field("image")].chunk_shape == wm.fields[want.Field("image")].chunk_shape);
  REQUIRE(rb.ds->num_samples() == 1);
  for (const auto& f : m.fields) {
    if (f.kind != FieldKind::kNdarray) continue;
    INFO(f.name);
    CHECK(Decoded(rb, f.name) == Decoded(want, f.name));
  }
  CHECK(rb.ShapeOf(0, "image") == Shape{2, 62, 70, 43});  // cropped to 62x87x86, then z 3 -> 3, y 2 -> 2.5, x 2 -> 4 mm
  // The same options, plus where they came from.
  const std::string bytes(reinterpret_cast<const char*>(ReadBytes(plans).data()), ReadBytes(plans).size());
  std::vector<KeyValue> extra;
  for (const auto& kv : m.provenance.options) {
    if (ProvenanceOption(wm, kv.key) != kv.value) extra.push_back(kv);
  }
  std::string listed;
  for (const auto& kv : extra) listed += kv.key + "=" + kv.value + " ";
  INFO(listed);
  CHECK(extra == std::vector<KeyValue>{{"spacing_rule", "plans"},
                                       {"plans", "nnUNetPlans.json"},
                                       {"plans_xxh3", Hex64(Checksum64(bytes.data(), bytes.size()))},
                                       {"plans_name", "nnUNetPlans"},
                                       {"plans_dataset", "Dataset042_Brain"},
                                       {"plans_configuration", "3d_linear"},
                                       {"plans_transpose_forward", "2,0,1"},
                                       {"plans_statistics", "nnUNetPlans.json"}});
  CHECK(ProvenanceOption(m, "resample_image") == "linear");
  CHECK(ProvenanceOption(m, "resample_mask") == "nearest");
  CHECK(ProvenanceOption(m, "patch_size") == "32x40x24");
  CHECK_THAT(PreprocessingNotes(*got),
             Catch::Contains("nnU-Net plans nnUNetPlans.json (nnUNetPlans, Dataset042_Brain), "
                             "configuration 3d_linear"));
  CHECK_THAT(PreprocessingNotes(*got), Catch::Contains("resampled: x 2 -> 4 mm, y 2 -> 2.5 mm, z 3 -> 3 mm (plans)"));
  CHECK_THAT(PreprocessingNotes(*got),
             Catch::Contains("zscore of channel 1 within the nonzero region, 0 outside (the plans' "
                             "use_mask_for_norm)"));
}

TEST_CASE("plans: use_mask_for_norm false z-scores every voxel, statistics from dataset_fingerprint.json") {
  TempDir dir;
  const std::string src = BrainDataset(dir);
  Json plans = BrainPlans({10, 200, 90, 40});
  Json& linear = plans["configurations"]["3d_linear"];
  linear["use_mask_for_norm"] = {true, false};  // channel 0 is CT: nnU-Net ignores its flag
  linear["spacing"] = {2.0, 3.0, 2.0};          // the source's: no resampling
  const Json props = plans["foreground_intensity_properties_per_channel"];
  plans.erase("foreground_intensity_properties_per_channel");
  MakeDirs(dir / "pp");
  WriteJson(dir / "pp/dataset_fingerprint.json",
            {{"foreground_intensity_properties_per_channel", props}, {"median_relative_size_after_cropping", 0.46}});
  ConvertOptions o;
  o.preprocess.plans_file = WriteJson(dir / "pp/plans.json", plans);
  o.preprocess.plans_configuration = "3d_linear";
  auto r = RunConvert(src, dir / "out", o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  const Readback rb = Open(dir / "out");
  CHECK(ProvenanceOption(rb.ds->manifest(), "zscore_region").empty());
  CHECK(ProvenanceOption(rb.ds->manifest(), "plans_statistics") == "dataset_fingerprint.json");
  CHECK(ProvenanceOption(rb.ds->manifest(), "patch_size") == "32x40x24");
  CHECK_THAT(PreprocessingNotes(*r),
             Catch::Contains("ct statistics of channel 0 from dataset_fingerprint.json: clip [10, 200], "
                             "mean 90, std 40"));
  // Channel 1 against numpy's z-score of the cropped case over every voxel.
  const std::vector<uint8_t> raw = ItkVoxels(src + "/imagesTr/brain_0001.nii.gz");  // i16 [62, 128, 128]
  std::vector<int64_t> box(6);                                                      // start z, y, x; size z, y, x
  std::memcpy(box.data(), rb.Array(0, "source.crop_box").data(), 48);
  const Shape shape = rb.ShapeOf(0, "image");
  REQUIRE(shape == Shape{2, box[3], box[4], box[5]});
  std::vector<double> v;
  for (int64_t z = 0; z < shape[1]; ++z)
    for (int64_t y = 0; y < shape[2]; ++y)
      for (int64_t x = 0; x < shape[3]; ++x) {
        const auto at = size_t(((z + box[0]) * 128 + y + box[1]) * 128 + x + box[2]);
        v.push_back(ElementAsDouble(&raw[2 * at], DType::kI16));
      }
  double mean = 0, var = 0;
  for (double x : v) mean += x / double(v.size());
  for (double x : v) var += (x - mean) * (x - mean) / double(v.size());
  const std::vector<double> norm = rb.Doubles(0, "image.normalization");
  CHECK(norm[6] == Approx(mean).epsilon(1e-12));
  CHECK(norm[7] == Approx(std::sqrt(var)).epsilon(1e-12));
  CHECK(std::vector<double>(norm.begin(), norm.begin() + 4) == std::vector<double>{10, 200, 90, 40});
  std::vector<float> image(size_t(shape[0] * shape[1] * shape[2] * shape[3]));
  std::memcpy(image.data(), Decoded(rb, "image").data(), image.size() * 4);
  for (size_t k = 0; k < v.size(); k += 97) {
    CHECK(image[v.size() + k] == Approx((v[k] - mean) / std::sqrt(var)).margin(1e-5));
    CHECK(image[k] == Approx((std::min(std::max(v[k], 10.0), 200.0) - 90) / 40).margin(1e-5));
  }
}

TEST_CASE("plans: a bad plans file is an error naming the file and the key") {
  TempDir dir;
  const Json good = BrainPlans({0, 1, 0, 1});
  const std::string good_path = WriteJson(dir / "good.json", good);
  REQUIRE(Apply(good_path).ok());
  REQUIRE(Apply(good_path, "3d_linear").ok());
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    const char* configuration;
    std::string message;
  };
  auto cfg = [](Json& j) -> Json& { return j["configurations"]["3d_fullres"]; };
  const std::vector<Case> cases = {
      {"missing configuration", [](Json&) {}, "3d_lowres",
       "configurations: no configuration '3d_lowres' (it has 2d, 3d_fullres, 3d_linear)"},
      {"2D configuration", [](Json&) {}, "2d",
       "configurations.2d.spacing: [3.0,2.5] has 2 entries: a 2D configuration"},
      {"unknown scheme", [&](Json& j) { cfg(j)["normalization_schemes"][1] = "FancyNormalization"; }, nullptr,
       "configurations.3d_fullres.normalization_schemes: unknown normalization scheme 'FancyNormalization'"},
      {"scheme without counterpart", [&](Json& j) { cfg(j)["normalization_schemes"][0] = "RGBTo01Normalization"; },
       nullptr, "RGBTo01Normalization has no counterpart"},
      {"transpose not a permutation",
       [](Json& j) {
         j["transpose_forward"] = {0, 0, 2};
       },
       nullptr, "transpose_forward: [0,0,2] is not a permutation of 0, 1, 2"},
      {"transpose of rank 2",
       [](Json& j) {
         j["transpose_forward"] = {1, 0};
       },
       nullptr, "transpose_forward: [1,0] is not a permutation"},
      {"transpose_backward not the inverse",
       [](Json& j) {
         j["transpose_backward"] = {2, 0, 1};
       },
       nullptr, "transpose_backward: [2,0,1] does not undo transpose_forward [2,0,1]"},
      {"spacing not positive",
       [&](Json& j) {
         cfg(j)["spacing"] = {4.0, 0.0, 2.5};
       },
       nullptr, "configurations.3d_fullres.spacing: [4.0,0.0,2.5]: 0.0 is not a spacing in 1e-06..1e+06 mm"},
      {"spacing of rank 4",
       [&](Json& j) {
         cfg(j)["spacing"] = {1, 1, 1, 1};
       },
       nullptr, "configurations.3d_fullres.spacing: [1,1,1,1] has 4 entries, expected 3"},
      {"spacing a string",
       [&](Json& j) {
         cfg(j)["spacing"] = {"1", 1, 1};
       },
       nullptr, "\"1\" is not a spacing"},
      {"use_mask_for_norm too short", [&](Json& j) { cfg(j)["use_mask_for_norm"] = {true}; }, nullptr,
       "configurations.3d_fullres.use_mask_for_norm: [true]: expected 2 true/false"},
      {"inheritance cycle", [](Json& j) { j["configurations"]["3d_fullres"]["inherits_from"] = "3d_linear"; },
       "3d_linear", "configurations.3d_fullres.inherits_from: circular: 3d_linear -> 3d_fullres -> 3d_linear"},
      {"missing parent", [](Json& j) { j["configurations"]["3d_linear"]["inherits_from"] = "3d_big"; }, "3d_linear",
       "configurations.3d_linear.inherits_from: names '3d_big', which the plans do not have"},
      {"image order 0", [&](Json& j) { cfg(j)["resampling_fn_data_kwargs"]["order"] = 0; }, nullptr,
       "configurations.3d_fullres.resampling_fn_data_kwargs.order: 0 has no counterpart (images: 3 cubic, 1 linear)"},
      {"mask order 3", [&](Json& j) { cfg(j)["resampling_fn_seg_kwargs"].erase("order"); }, nullptr,
       "resampling_fn_seg_kwargs.order: 3 (absent) has no counterpart (masks: 1 per-label linear, 0 nearest)"},
      {"separate z forced", [&](Json& j) { cfg(j)["resampling_fn_data_kwargs"]["force_separate_z"] = true; }, nullptr,
       "resampling_fn_data_kwargs.force_separate_z: true: only null"},
      {"order_z 1", [&](Json& j) { cfg(j)["resampling_fn_seg_kwargs"]["order_z"] = 1; }, nullptr,
       "resampling_fn_seg_kwargs.order_z: 1: only 0"},
      {"another preprocessor", [&](Json& j) { cfg(j)["preprocessor_name"] = "MyPreprocessor"; }, nullptr,
       "configurations.3d_fullres.preprocessor_name: \"MyPreprocessor\": only DefaultPreprocessor"},
      {"a reorienting reader", [](Json& j) { j["image_reader_writer"] = "NibabelIOWithReorient"; }, nullptr,
       "image_reader_writer: \"NibabelIOWithReorient\" reorients the images"},
      {"ct channel without statistics", [](Json& j) { j["foreground_intensity_properties_per_channel"].erase("0"); },
       nullptr, "foreground_intensity_properties_per_channel.0: missing (channel 0 is normalized as CT)"},
      {"statistic not a number",
       [](Json& j) { j["foreground_intensity_properties_per_channel"]["0"]["std"] = nullptr; }, nullptr,
       "foreground_intensity_properties_per_channel.0.std: missing or not a finite number"},
      {"no statistics anywhere", [](Json& j) { j.erase("foreground_intensity_properties_per_channel"); }, nullptr,
       "foreground_intensity_properties_per_channel: missing, and "},
      {"patch size of rank 2",
       [&](Json& j) {
         cfg(j)["patch_size"] = {64, 64};
       },
       nullptr, "configurations.3d_fullres.patch_size: [64,64] is not 3 positive voxel counts"},
      {"not a plans file",
       [](Json& j) {
         j = Json{{"name", "x"}};
       },
       nullptr, "configurations: missing (not an nnU-Net v2 plans file)"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Json j = good;
    c.edit(j);
    const std::string path = WriteJson(dir / "bad.json", j);
    const Status s = Apply(path, c.configuration ? c.configuration : "3d_fullres");
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.ToString(), Catch::StartsWith("invalid argument: " + path + ": ") && Catch::Contains(c.message));
  }
  WriteText(dir / "broken.json", "{\"configurations\": ");
  CHECK_THAT(Apply(dir / "broken.json").ToString(), Catch::Contains("broken.json: not a JSON object"));
  const Status missing = Apply(dir / "none.json");
  CHECK(missing.code() == StatusCode::kIOError);
  CHECK_THAT(missing.ToString(), Catch::Contains("none.json: cannot open"));

  // Plans of one channel for a dataset of two: the case fails, naming both counts.
  Json one = good;
  one["configurations"]["3d_fullres"]["normalization_schemes"] = {"ZScoreNormalization"};
  one["configurations"]["3d_fullres"]["use_mask_for_norm"] = {false};
  ConvertOptions o;
  o.preprocess.plans_file = WriteJson(dir / "one.json", one);
  auto r = RunConvert(BrainDataset(dir), dir / "out", o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().ToString(), Catch::Contains("imagesTr/brain: has 2 channel(s), the plans name 1"));
}

TEST_CASE("plans: flags that set what the plans set are usage errors naming both, --help explains --plans") {
  for (const auto& [flags, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--spacing", "1"}, "--spacing contradicts --plans p.json, which sets the target spacing"},
           {{"--normalize", "zscore"}, "--normalize contradicts --plans p.json"},
           {{"--resample-image", "linear"}, "--resample-image contradicts --plans p.json"},
           {{"--resample-mask", "nearest"}, "--resample-mask contradicts --plans p.json"},
           {{"--patch-size", "64x64x64"}, "--patch-size contradicts --plans p.json, which sets the patch size"},
           {{"--preprocess", "nnunet"}, "--preprocess contradicts --plans p.json"},
           {{"--crop", "none"}, "--crop contradicts --plans p.json"}}) {
    std::vector<std::string> args = {"src", "-o", "dst", "--plans", "p.json"};
    args.insert(args.end(), flags.begin(), flags.end());
    CHECK_THAT(ParseCommandLine(args).status().ToString(), Catch::Contains(named));
  }
  auto agree = ParseCommandLine({"src", "-o", "dst", "--plans", "p.json", "--crop", "nonzero", "--dtype", "f16",
                                 "--preprocess", "none", "--configuration", "3d_lowres"});
  REQUIRE(agree.ok());
  CHECK(agree->options.preprocess.plans_file == "p.json");
  CHECK(agree->options.preprocess.plans_configuration == "3d_lowres");
  CHECK(Parse({"src", "-o", "dst", "--plans", "p.json"}).preprocess.plans_configuration == "3d_fullres");
  CHECK_THAT(ParseCommandLine({"src", "-o", "dst", "--configuration", "2d"}).status().ToString(),
             Catch::Contains("--configuration needs --plans"));
  std::string out;
  CHECK(Shell(std::string(SHARDIFY_BIN) + " src -o dst --plans p.json --spacing 1", &out) == 2);
  CHECK_THAT(out, Catch::Contains("--spacing contradicts --plans p.json"));
  CHECK(Shell(std::string(SHARDIFY_BIN) + " --help", &out) == 0);
  CHECK_THAT(out,
             Catch::Contains("--plans") && Catch::Contains("transpose_forward") && Catch::Contains("--configuration"));
}

}  // namespace shardify::convert
