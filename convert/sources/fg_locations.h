// Foreground locations of a mask, for patch sampling that oversamples the foreground
// (nnU-Net's): the "mask.fg_locations" field of docs/fields.md. The converter
// (--patch-size) and the Python Writer compute them with this one function.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "format/manifest.h"
#include "format/writer.h"

namespace shardify::convert {

// Foreground locations of one case's mask [C, spatial...]: for every class (the voxel value
// when C is 1; channel index + 1 for a one-hot mask with C > 1; 0 is background), at most
// `cap` voxels drawn uniformly without replacement (reservoir sampling over the voxels in
// memory order, one mt19937_64 seeded by `seed` and `case_index`). Rows [class, coords...]
// are sorted by class, then by position: an i32 array [N, 1 + S]. A mask with 0 channels
// gives 0 rows. InvalidArgument when the mask has no spatial axes, its bytes disagree with
// its shape, or a class or coordinate does not fit an i32. Thread-safe.
Result<FieldValue> FgLocations(const FieldSpec& mask_spec, const FieldValue& mask, uint64_t cap, uint64_t seed,
                               uint64_t case_index);

}  // namespace shardify::convert
