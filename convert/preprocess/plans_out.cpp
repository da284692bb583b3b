// nnU-Net's dataset_fingerprint.json and nnUNetPlans.json of a --preprocess nnunet
// conversion (see plans_internal.h). Keys and their order follow nnU-Net v2.8.1's
// DatasetFingerprintExtractor.run and ExperimentPlanner.plan_experiment /
// get_plans_for_configuration (nnunetv2/experiment_planning/).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "convert/preprocess/plans_internal.h"

namespace shardify::convert::detail {
namespace {

using Json = nlohmann::ordered_json;

const char* SchemeClass(Normalization n) {
  switch (n) {
    case Normalization::kZScore:
      return "ZScoreNormalization";
    case Normalization::kCt:
      return "CTNormalization";
    case Normalization::kNone:
      return "NoNormalization";
  }
  return "?";
}

// nnU-Net's resampling kwargs: resample_data_or_seg_to_shape with its anisotropy rule.
Json ResamplingKwargs(bool is_seg, int order) {
  return Json{{"is_seg", is_seg}, {"order", order}, {"order_z", 0}, {"force_separate_z", nullptr}};
}

// Entry i of `v` (array order) at nnU-Net's axis i: v[transpose[i]].
template <typename T>
std::vector<T> Transposed(const std::vector<T>& v, const std::array<int, 3>& transpose) {
  std::vector<T> out;
  for (int a : transpose) out.push_back(v[static_cast<size_t>(a)]);
  return out;
}

// numpy's median per axis of per-case vectors.
std::vector<double> Median(const std::vector<std::vector<double>>& rows) {
  std::vector<double> out;
  for (size_t a = 0; a < rows[0].size(); ++a) {
    std::vector<double> column;
    for (const auto& r : rows) column.push_back(r[a]);
    out.push_back(Percentile(std::move(column), 50));
  }
  return out;
}

std::vector<double> AsDoubles(const Shape& s) { return std::vector<double>(s.begin(), s.end()); }

Json Intensities(const std::vector<IntensityProperties>& channels) {
  Json out = Json::object();
  for (size_t c = 0; c < channels.size(); ++c) {
    const IntensityProperties& p = channels[c];
    out[std::to_string(c)] = Json{{"max", p.max},
                                  {"mean", p.mean},
                                  {"median", p.median},
                                  {"min", p.min},
                                  {"percentile_00_5", p.percentile_00_5},
                                  {"percentile_99_5", p.percentile_99_5},
                                  {"std", p.std}};
  }
  return out;
}

Json FingerprintJson(const Fingerprint& f) {
  Json shapes = Json::array();
  for (const Shape& s : f.cases.cropped) shapes.push_back(s);
  return Json{{"foreground_intensity_properties_per_channel", Intensities(f.intensities)},
              {"median_relative_size_after_cropping", f.median_relative_size_after_cropping},
              {"shapes_after_crop", shapes},
              {"spacings", f.cases.spacings}};
}

// The 3d_fullres configuration of `plan` (its axes in nnU-Net's order).
Result<Json> Configuration(const PlansInput& in) {
  const PreprocessPlan& plan = *in.plan;
  const Fingerprint& f = *in.fingerprint;
  std::vector<std::vector<double>> resampled;
  for (size_t i = 0; i < f.cases.cropped.size(); ++i) {
    ASSIGN_OR_RETURN(const Shape s, TargetShape(f.cases.cropped[i], f.cases.spacings[i], plan.spacing));
    resampled.push_back(AsDoubles(s));
  }
  Json schemes = Json::array(), use_mask = Json::array();
  for (size_t c = 0; c < plan.normalize.size(); ++c) {
    schemes.push_back(SchemeClass(plan.normalize[c]));
    use_mask.push_back(plan.normalize[c] == Normalization::kZScore && plan.InRegion(c));
  }
  Json config{{"data_identifier", "nnUNetPlans_3d_fullres"}, {"preprocessor_name", "DefaultPreprocessor"}};
  if (!in.patch_size.empty()) config["patch_size"] = Transposed(in.patch_size, plan.transpose);
  config["median_image_size_in_voxels"] = Transposed(Median(resampled), plan.transpose);
  config["spacing"] = Transposed(plan.spacing, plan.transpose);
  config["normalization_schemes"] = schemes;
  config["use_mask_for_norm"] = use_mask;
  config["resampling_fn_data"] = "resample_data_or_seg_to_shape";
  config["resampling_fn_seg"] = "resample_data_or_seg_to_shape";
  config["resampling_fn_data_kwargs"] =
      ResamplingKwargs(false, plan.options.image_interp == ImageInterp::kCubic ? 3 : 1);
  config["resampling_fn_seg_kwargs"] = ResamplingKwargs(true, plan.options.mask_interp == MaskInterp::kLinear ? 1 : 0);
  config["resampling_fn_probabilities"] = "resample_data_or_seg_to_shape";
  config["resampling_fn_probabilities_kwargs"] = ResamplingKwargs(false, 1);
  // Present, so that nnU-Net's ConfigurationManager takes these plans for the current
  // format (its preprocessing never reads it); null, since no network was planned.
  config["architecture"] = nullptr;
  return config;
}

}  // namespace

Result<NnunetFiles> NnunetPlans(const PlansInput& in) {
  const PreprocessPlan& plan = *in.plan;
  const Fingerprint& f = *in.fingerprint;
  if (plan.spacing.size() != 3 || plan.normalize.empty() || f.cases.spacings.empty()) {
    return InvalidArgument("nnU-Net plans need a target spacing, a normalization per channel and training cases");
  }
  ASSIGN_OR_RETURN(Json config, Configuration(in));
  std::vector<std::vector<double>> shapes;
  for (const Shape& s : f.cases.cropped) shapes.push_back(AsDoubles(s));
  std::vector<int64_t> median_shape;
  for (double v : Transposed(Median(shapes), plan.transpose))
    median_shape.push_back(static_cast<int64_t>(RoundHalfToEven(v)));
  std::array<int, 3> backward{};
  for (int i = 0; i < 3; ++i) backward[static_cast<size_t>(plan.transpose[static_cast<size_t>(i)])] = i;
  const Json plans{{"dataset_name", in.dataset_name},
                   {"plans_name", "nnUNetPlans"},
                   {"original_median_spacing_after_transp", Transposed(Median(f.cases.spacings), plan.transpose)},
                   {"original_median_shape_after_transp", median_shape},
                   {"image_reader_writer", "SimpleITKIO"},
                   {"transpose_forward", plan.transpose},
                   {"transpose_backward", backward},
                   {"configurations", Json{{"3d_fullres", config}}},
                   {"experiment_planner_used", "shardify --preprocess nnunet"},
                   {"label_manager", "LabelManager"},
                   {"foreground_intensity_properties_per_channel", Intensities(f.intensities)}};
  return NnunetFiles{plans.dump(4) + "\n", FingerprintJson(f).dump(4) + "\n"};
}

}  // namespace shardify::convert::detail
