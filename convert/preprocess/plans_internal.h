// nnU-Net's own files of a --preprocess nnunet conversion (internal; plans_out.cpp): the
// dataset fingerprint and the plans, written into the dataset beside its manifest
// (kPlansFile, kFingerprintFile) as nnU-Net's fingerprint extractor and experiment planner
// write theirs, so that `shardify SRC --plans DATASET/nnUNetPlans.json` reproduces the
// dataset and nnU-Net's own planning of the same source can be compared with it.
#pragma once

#include <string>
#include <vector>

#include "convert/preprocess/intensity_internal.h"

namespace shardify::convert::detail {

inline constexpr char kPlansFile[] = "nnUNetPlans.json";
inline constexpr char kFingerprintFile[] = "dataset_fingerprint.json";

// What nnU-Net's dataset_fingerprint.json holds, of the training cases the first pass read.
struct Fingerprint {
  CaseShapes cases;                              // spacings and shapes_after_crop
  std::vector<IntensityProperties> intensities;  // per channel; empty when none were drawn
  double median_relative_size_after_cropping = 1;
};

struct PlansInput {
  std::string dataset_name;  // nnU-Net's: the source folder's name
  const PreprocessPlan* plan = nullptr;
  const Fingerprint* fingerprint = nullptr;
  Shape patch_size;  // --patch-size, array order; empty: none
};

struct NnunetFiles {
  std::string plans, fingerprint;  // JSON texts
};

// The two files: the fingerprint as its extractor writes it; the plans as the default
// planner (ExperimentPlanner, nnU-Net v2.8.1) writes them, with one configuration,
// 3d_fullres, holding what this conversion applied: target spacing and median shape in
// nnU-Net's axis order (transpose_forward: plan.transpose), normalization schemes and
// use_mask_for_norm, the resampling functions and orders; the plans' median spacing and
// shape and foreground intensities from the fingerprint. What shardify does not plan (the
// network: "architecture" is null; batch size; patch size unless given) is absent, so
// nnU-Net's preprocessing reads these plans and its trainer does not. InvalidArgument
// when the plan is not one nnU-Net could have made (no resampling, no normalization).
Result<NnunetFiles> NnunetPlans(const PlansInput& in);

}  // namespace shardify::convert::detail
