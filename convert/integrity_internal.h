// Checks of a dataset's values before they are preprocessed (internal), the ones nnU-Net's
// verify_dataset_integrity makes: NaN and infinite image voxels.
// Thread-safe: nothing here keeps state.
#pragma once

#include "convert/case.h"
#include "convert/preprocess.h"
#include "format/status.h"

namespace shardify::convert::detail {

// The NaN and infinite voxels of a case's decoded `image` (float dtypes; integers have
// none): with o.nan_to_num they become +0; otherwise, when `o` normalizes or resamples
// (which would spread them over the channel), the case fails with InvalidArgument naming
// the file of each channel that has any and how many; else they are kept as they are.
Status CheckFinite(const PreprocessOptions& o, const CaseInput& in, DecodedImage* image);

}  // namespace shardify::convert::detail
