// nnU-Net v2 plans files as conversion options: `shardify SRC --plans nnUNetPlans.json
// [--configuration 3d_fullres]` preprocesses as nnU-Net's DefaultPreprocessor does with
// that file, through the ordinary preprocessing options (preprocess.h), so that a plans
// file and the equivalent flags give the same dataset.
//
// What one configuration (its "inherits_from" chain resolved, nearest first) sets:
//   crop_nonzero       always (nnU-Net crops every case to its nonzero box)
//   spacing            "spacing" (3 entries; a 2D configuration is refused)
//   normalize          "normalization_schemes": ZScoreNormalization -> zscore,
//                      CTNormalization -> ct, NoNormalization -> none
//   use_mask_for_norm  "use_mask_for_norm", one per scheme
//   ct_statistics      the plans' "foreground_intensity_properties_per_channel" (older
//                      plans: "..._by_modality"; neither: dataset_fingerprint.json beside
//                      the plans file): percentile_00_5, percentile_99_5, mean, std
//   image_interp       "resampling_fn_data_kwargs" order 3 -> cubic, 1 -> linear
//   mask_interp        "resampling_fn_seg_kwargs" order 1 -> linear, 0 -> nearest
//   patch_size         "patch_size" (ConvertOptions: chunked storage)
// Both kwargs must have order_z 0 and force_separate_z null (nnU-Net's defaults, which
// are the only rule shardify has). nnU-Net's axes are those of the array after
// "transpose_forward"; shardify keeps arrays (and their geometry) in source order z, y, x,
// so the spacing and patch size are mapped back through it: array axis
// transpose_forward[i] takes the plans' entry i.
#pragma once

#include "base/status.h"
#include "convert/convert.h"

namespace shardify::convert {

// Reads o->preprocess.plans_file, resolves o->preprocess.plans_configuration and replaces
// the options above with what it says; sets from_plans (the file's name and XXH3 checksum,
// dataset_name, plans_name, the configuration, transpose_forward, where the statistics came
// from) and clears plans_file. It overwrites those options whatever they held: contradicting
// flags are the command line's to refuse (cli.cpp). A missing or unreadable file is an
// IOError; a file that does not hold what nnU-Net writes is InvalidArgument naming the file
// and the key: a configuration it lacks (listing those it has), an inheritance cycle, a
// transpose that is not a permutation of 0, 1, 2 (or a transpose_backward that does not
// undo it), a spacing of another rank or not positive, an unknown normalization scheme or
// one without a counterpart (RescaleTo01Normalization, RGBTo01Normalization), a
// resampling order shardify lacks, another preprocessor than DefaultPreprocessor, an image
// reader that reorients, missing statistics for a ct channel.
Status ApplyPlans(ConvertOptions* o);

}  // namespace shardify::convert
