// Volumes written by `shardtrain predict` (internal): the fields a predicted volume carries
// besides `index` and `mask`, and its mask, optionally mapped back onto the grid of the
// case's source file (reader/source_grid.h) the way nnU-Net exports predictions: class
// probabilities resampled linearly onto the crop box, then argmax, then the box placed
// into the source shape with background (0) around it.
//
// Fields after `index` and `mask` (each only when the dataset has what it comes from):
//   mask.spacing, mask.origin, mask.direction  the written mask's grid: the source's with
//                                              source_grid, else the stored image's;
//   mask.nifti_header                          the image's source header, when the mask is
//                                              on the source grid (export retypes it);
//   source.*                                   without source_grid, the case's record, so
//                                              `shardtool export --source-grid` maps it.
// Functions may throw c10::Error (Predict catches it).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dataset.h"
#include "format/manifest.h"
#include "format/writer.h"

namespace shardify::trainer::detail {

struct VolumeLayout {
  bool source_grid = false;         // masks go back onto the source grid
  bool multi_label = false;         // K 0/1 channels (probabilities > 0.5), else one class map
  bool mapped = false;              // ... and the dataset has a record to map them with
  std::string geometry;             // "source", "image" or "" (none): mask.spacing & co from
  bool header = false;              // mask.nifti_header from image.nifti_header
  std::vector<std::string> copied;  // fields of the dataset copied into each sample
};

// The layout for predictions of `ds`; appends its fields to `fields` (after index, mask).
VolumeLayout PlanVolumes(const Dataset& ds, bool source_grid, std::vector<FieldSpec>* fields);

// The sample of volume `index` from its class probabilities [K, D, H, W] (any device): a
// mask [1, D, H, W] of classes, or multi-label [K, D, H, W].
Result<SampleInput> VolumeSample(const Dataset& ds, const VolumeLayout& layout, uint64_t index,
                                 const std::string& split, const torch::Tensor& probs);

}  // namespace shardify::trainer::detail
