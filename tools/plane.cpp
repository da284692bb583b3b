#include <algorithm>
#include <cmath>

#include "tools/plane_internal.h"
#include "tools/tool_internal.h"

namespace shardify::tools::detail {

Result<Plane> ExtractPlane(const uint8_t* data, size_t size, DType dtype, const Shape& shape) {
  int64_t c = 1, d = 1, h = 0, w = 0;
  if (shape.size() == 2) {
    h = shape[0], w = shape[1];
  } else if (shape.size() == 3) {
    c = shape[0], h = shape[1], w = shape[2];
  } else if (shape.size() == 4) {
    c = shape[0], d = shape[1], h = shape[2], w = shape[3];
  } else {
    return InvalidArgument("cannot show an array of shape " + ShapeToString(shape) +
                           " as an image (expected [H, W], [C, H, W] or [C, D, H, W])");
  }
  ASSIGN_OR_RETURN(uint64_t need, ByteSize(shape, dtype));
  if (need != size || h <= 0 || w <= 0 || c <= 0 || d <= 0 || h > (1 << 20) || w > (1 << 20)) {
    return InvalidArgument("array of shape " + ShapeToString(shape) + " has " + std::to_string(size) +
                           " bytes or is empty");
  }
  if (h * w > (int64_t(1) << 26)) {
    return Unsupported("a plane of " + std::to_string(w) + "x" + std::to_string(h) + " pixels is too large to draw");
  }
  Plane p;
  p.width = static_cast<uint32_t>(w);
  p.height = static_cast<uint32_t>(h);
  p.channels = static_cast<uint32_t>(std::min<int64_t>(c, 4));
  p.v.resize(size_t(p.channels) * h * w);
  const size_t es = DTypeSize(dtype);
  const int64_t z = d / 2;
  for (int64_t ch = 0; ch < p.channels; ++ch) {
    const uint8_t* src = data + ((ch * d + z) * h * w) * es;
    double* dst = p.v.data() + ch * h * w;
    for (int64_t k = 0; k < h * w; ++k) dst[k] = ElementAsDouble(src + k * es, dtype);
  }
  return p;
}

std::vector<uint8_t> ToRgb8(const Plane& p, DType dtype) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : p.v) {
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  }
  if (dtype == DType::kU8 && hi >= 128) lo = 0, hi = 255;  // ordinary 8-bit photos as they are
  if (!(hi > lo)) hi = lo + 1;
  const double scale = 255.0 / (hi - lo);
  auto to8 = [&](double x) -> uint8_t {
    if (!std::isfinite(x)) return 0;
    return static_cast<uint8_t>(std::clamp((x - lo) * scale + 0.5, 0.0, 255.0));
  };
  const size_t n = size_t(p.width) * p.height;
  std::vector<uint8_t> rgb(n * 3);
  const bool color = p.channels >= 3;
  for (size_t k = 0; k < n; ++k) {
    for (int j = 0; j < 3; ++j) rgb[k * 3 + j] = to8(p.v[(color ? j : 0) * n + k]);
  }
  return rgb;
}

}  // namespace shardify::tools::detail
