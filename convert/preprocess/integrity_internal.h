// Checks of a dataset's values (internal), the ones nnU-Net's verify_dataset_integrity
// makes: NaN and infinite image voxels, mask values that dataset.json does not declare.
// Thread-safe: nothing here keeps state.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "base/status.h"
#include "convert/convert.h"
#include "convert/preprocess/preprocess.h"
#include "convert/sources/case.h"

namespace shardify::convert::detail {

// The NaN and infinite voxels of a case's decoded `image` (float dtypes; integers have
// none): with o.nan_to_num they become +0; otherwise, when `o` normalizes or resamples
// (which would spread them over the channel), the case fails with InvalidArgument naming
// the file of each channel that has any and how many; else they are kept as they are.
Status CheckFinite(const PreprocessOptions& o, const CaseInput& in, DecodedImage* image);

// A mask with more distinct undeclared values than this is not a label map.
inline constexpr size_t kMaxUndeclaredLabels = 1024;

struct LabelCheck {
  int threads = 1;
  uint64_t max_bytes = kDefaultMaxImageBytes;  // per mask decoded
  const std::atomic<bool>* cancel = nullptr;
  ProgressSink* progress = nullptr;
  bool adopt = false;   // --labels-from-masks
  bool scaled = false;  // values as their NIfTI scaling gives them (CaseReading::scaled)
};
// Reads the mask file of every case in `ok` (on c.threads threads, before anything is
// written, as nnU-Net's integrity check reads them) and looks for values that
// plan->declared_mask_values (dataset.json) lacks; with none declared, reads nothing.
// Undeclared values are InvalidArgument listing them, how many masks hold them and the
// first few; with c.adopt, integer ones become labels "label_<v>" in
// plan->mask_labels_json instead, said in `warnings`. A mask that cannot be read is left
// to fail when it is converted.
Status CheckMaskLabels(SourcePlan* plan, const std::vector<bool>& ok, const LabelCheck& c,
                       std::vector<std::string>* warnings);

}  // namespace shardify::convert::detail
