// PatchSampler: random training patches from volumes, with foreground oversampling.
//
// For sample i and draw k, the patch position depends only on (seed, i, k, forced), never
// on threads or timing. A forced draw centres the patch on a stored foreground location
// of a class chosen at random among those present in the case (nnU-Net's oversampling);
// an unforced draw places it uniformly. Parts of a patch outside the volume are padded:
// the image with 0, the label with `label_pad`. Only the chunks a patch touches are
// decompressed (SampleView::DecodeRegion), straight into the caller's buffers.
//
// With a `margin`, the region read is the patch grown by margin[a] voxels on both sides
// of each spatial axis, around the same patch position: room for a rotation or scaling
// on the training device to draw from real data before it crops back to the patch.
//
// Foreground locations come from the ndarray field `locations_field` (i32 [N, 1 + S]: a
// class value then S spatial coordinates per row, as written by shardify --patch-size);
// a case without that field or without rows is sampled uniformly.
//
// Thread-safety: Sample() is const and may run on many threads, each with its own Decoder.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "format/dataset.h"
#include "format/fields.h"
#include "format/types.h"

namespace shardify {

struct PatchOptions {
  std::string image_field = kImageField;
  std::string label_field = kMaskField;  // empty = images only
  std::string locations_field = kMaskFgLocationsField;
  Shape patch;                        // spatial size, applied to the trailing axes (e.g. 128x128x128)
  Shape margin;                       // empty, or >= 0 voxels read on each side of the patch per axis
  double foreground_fraction = 0.33;  // share of each batch forced to contain foreground
  int64_t label_pad = -1;             // label value outside the volume (cast to the label dtype)
  uint64_t seed = 0;
  // A sample's foreground locations are decoded once and kept, grouped by class, for the
  // foreground draws of later epochs, up to this many bytes (then the oldest go; 0: none).
  uint64_t locations_cache_bytes = 64ull << 20;
  // Decoded chunks of compressed volumes are kept for the later patches that touch them
  // again (a ChunkCache), up to this many bytes (0: none). Raw chunks are copied in place.
  uint64_t chunk_cache_bytes = 512ull << 20;
  // The spatial size read: patch + 2 * margin per axis (the patch when margin is empty).
  Shape ReadShape() const;
};

struct PatchInfo {
  Shape start;            // start of the patch in the full array (may be negative: padded);
                          // the region read starts `margin` earlier
  bool forced = false;    // a foreground draw was asked for
  int64_t fg_class = -1;  // the class it was centred on, or -1
};

class PatchSampler {
 public:
  // Checks the fields exist, are ndarrays of equal spatial rank >= patch rank, that the
  // patch is positive and the margin (if any) non-negative, one value per patch axis.
  // `dataset` must outlive the sampler.
  static Result<std::unique_ptr<PatchSampler>> Create(const Dataset* dataset, PatchOptions options);

  // Bytes of one image patch and of one label patch (all channels, margin included), for
  // sizing buffers.
  // Precondition: every sample has the channel count of sample `index` (checked in Sample).
  Result<uint64_t> ImageBytes(uint64_t index) const;
  Result<uint64_t> LabelBytes(uint64_t index) const;

  // Whether draw `slot` of a batch of `batch_size` is forced to foreground: the last
  // round(batch_size * foreground_fraction) slots are, as in nnU-Net.
  bool Forced(size_t slot, size_t batch_size) const;

  // Decodes the patch of sample `index`, draw `draw` (with its margin), into image_dst (and
  // label_dst when a label field is set). Errors name the sample.
  Status Sample(uint64_t index, uint64_t draw, bool forced, void* image_dst, size_t image_size, void* label_dst,
                size_t label_size, Decoder& decoder, PatchInfo* info = nullptr) const;

  // The label pad as the label field stores it (-1 in a u8 field: 255); 0 without a label field.
  int64_t StoredLabelPad() const;

  const PatchOptions& options() const { return options_; }
  // How many times foreground locations were decoded (the others came from the cache).
  uint64_t locations_decoded() const;
  // The cache of decoded chunks; null when options().chunk_cache_bytes is 0.
  const ChunkCache* chunk_cache() const { return chunks_.get(); }

 private:
  struct Locations;
  // The locations of `v` (shape `ls`), from the cache or decoded into it.
  Result<std::shared_ptr<const Locations>> LocationsOf(const SampleView& v, const Shape& ls, Decoder& decoder) const;
  PatchSampler(const Dataset* dataset, PatchOptions options)
      : dataset_(dataset),
        options_(std::move(options)),
        chunks_(options_.chunk_cache_bytes > 0 ? std::make_unique<ChunkCache>(options_.chunk_cache_bytes) : nullptr) {}
  Result<Shape> RegionShape(uint64_t index, int field) const;
  Status ChooseStart(const SampleView& v, const Shape& spatial, uint64_t draw, bool forced, Decoder& decoder,
                     PatchInfo* info) const;

  const Dataset* dataset_;
  PatchOptions options_;
  int image_ = -1, label_ = -1, locations_ = -1;
  std::unique_ptr<ChunkCache> chunks_;  // thread-safe: used from the const Sample()

  mutable std::mutex cache_mu_;                                                   // the members below
  mutable std::unordered_map<uint64_t, std::shared_ptr<const Locations>> cache_;  // by sample index
  mutable std::deque<uint64_t> cache_order_;                                      // oldest first
  mutable uint64_t cache_bytes_ = 0, locations_decoded_ = 0;
};

}  // namespace shardify
