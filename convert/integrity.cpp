// Checks of a dataset's values before preprocessing (see integrity_internal.h).
#include <cmath>
#include <cstring>

#include "convert/integrity_internal.h"
#include "format/elements.h"

namespace shardify::convert::detail {
namespace {

bool IsFloat(DType t) { return t == DType::kF16 || t == DType::kF32 || t == DType::kF64; }

struct NonFinite {
  uint64_t nan = 0, inf = 0;
};

// Counts (and with `zero`, zeroes) the NaN and infinite elements of n elements at `p`.
NonFinite ScanChannel(uint8_t* p, DType t, uint64_t n, bool zero) {
  NonFinite c;
  const size_t es = DTypeSize(t);
  for (uint64_t i = 0; i < n; ++i, p += es) {
    double v = 0;
    if (t == DType::kF32) {
      float f;
      std::memcpy(&f, p, sizeof f);
      v = f;
    } else {
      v = ElementAsDouble(p, t);
    }
    if (std::isfinite(v)) continue;
    ++(std::isnan(v) ? c.nan : c.inf);
    if (zero) std::memset(p, 0, es);
  }
  return c;
}

// The file channel `c` of a case came from: its own file when each has one channel.
std::string ChannelSource(const CaseInput& in, int64_t channels, int64_t c) {
  if (static_cast<int64_t>(in.images.size()) == channels) return in.images[static_cast<size_t>(c)];
  const std::string where = in.images.size() == 1 ? in.images[0] : in.name;
  return where + " (channel " + std::to_string(c) + ")";
}

}  // namespace

Status CheckFinite(const PreprocessOptions& o, const CaseInput& in, DecodedImage* image) {
  const DType t = image->info.dtype;
  const bool spreads = o.normalizes() || o.resamples();
  if (!IsFloat(t) || !(o.nan_to_num || spreads) || image->info.shape.empty()) return Status::Ok();
  const int64_t channels = image->info.shape[0];
  const uint64_t voxels = channels > 0 ? image->pixels.size() / DTypeSize(t) / static_cast<uint64_t>(channels) : 0;
  std::string found;
  for (int64_t c = 0; c < channels; ++c) {
    uint8_t* p = image->pixels.data() + static_cast<uint64_t>(c) * voxels * DTypeSize(t);
    const NonFinite n = ScanChannel(p, t, voxels, o.nan_to_num);
    if (n.nan + n.inf == 0 || o.nan_to_num) continue;
    found += (found.empty() ? "" : "; ") + ChannelSource(in, channels, c) + ": " + std::to_string(n.nan) + " NaN and " +
             std::to_string(n.inf) + " infinite voxel(s) of " + std::to_string(voxels);
  }
  if (found.empty()) return Status::Ok();
  return InvalidArgument(found +
                         "; normalizing or resampling would spread them over the channel (--nan-to-num makes them 0)");
}

}  // namespace shardify::convert::detail
