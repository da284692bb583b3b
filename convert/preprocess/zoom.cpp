// Resampling that must equal scipy's to the bit (see resample_internal.h): linear zoom of
// label indicators, and nearest neighbour along one axis. Plain loops in double, each
// operation in the order scipy's ndimage performs it, so that exact ties (a label's
// indicator at 0.5, a coordinate halfway between two slices) fall the same way.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "convert/preprocess/resample_internal.h"

namespace shardify::convert::detail {
namespace {

// Output index j of an axis of n source and m output voxels as a source coordinate:
// (j + 0.5) * (n / m) - 0.5, the three operations in this order. Not clamped: with mode
// 'nearest' scipy clamps the indices of the taps, not the coordinate.
double SourceCoordinate(int64_t j, int64_t n, int64_t m) {
  const double zoom = static_cast<double>(n) / static_cast<double>(m);
  double c = static_cast<double>(j);
  c += 0.5;
  c *= zoom;
  c -= 0.5;
  return c;
}

int64_t ClampIndex(int64_t i, int64_t n) { return std::min(std::max<int64_t>(i, 0), n - 1); }

// Per output index of one axis: the two source indices (the edge voxel beyond the edge)
// and their weights, as scipy's spline weights of order 1 give them: 1 - t for the first,
// then 1 minus that.
struct Taps {
  std::vector<int64_t> lo, hi;
  std::vector<double> w_lo, w_hi;
};

Taps LinearTaps(int64_t n, int64_t m) {
  Taps t;
  for (int64_t j = 0; j < m; ++j) {
    const double c = SourceCoordinate(j, n, m);
    const double start = std::floor(c);
    const double w0 = 1.0 - (c - start);
    const auto i = static_cast<int64_t>(start);
    t.lo.push_back(ClampIndex(i, n));
    t.hi.push_back(ClampIndex(i + 1, n));
    t.w_lo.push_back(w0);
    t.w_hi.push_back(1.0 - w0);
  }
  return t;
}

}  // namespace

void ZoomLinear(const std::vector<double>& in, const Shape& from, const Shape& to, const std::array<int, 3>& order,
                std::vector<double>* out) {
  const Taps taps[3] = {LinearTaps(from[0], to[0]), LinearTaps(from[1], to[1]), LinearTaps(from[2], to[2])};
  const int64_t stride[3] = {from[1] * from[2], from[2], 1};
  out->assign(ShapeProduct(to), 0.0);
  double* o = out->data();
  int64_t offset[3][2];  // per array axis: the two taps' offsets at the current voxel
  double weight[3][2];
  const auto set = [&](int axis, int64_t j) {
    const Taps& t = taps[axis];
    offset[axis][0] = t.lo[static_cast<size_t>(j)] * stride[axis];
    offset[axis][1] = t.hi[static_cast<size_t>(j)] * stride[axis];
    weight[axis][0] = t.w_lo[static_cast<size_t>(j)];
    weight[axis][1] = t.w_hi[static_cast<size_t>(j)];
  };
  const int p = order[0], q = order[1], r = order[2];
  for (int64_t k = 0; k < to[0]; ++k) {
    set(0, k);
    for (int64_t j = 0; j < to[1]; ++j) {
      set(1, j);
      for (int64_t i = 0; i < to[2]; ++i) {
        set(2, i);
        double sum = 0.0;
        for (int a = 0; a < 2; ++a) {  // corners with the last axis of `order` fastest
          for (int b = 0; b < 2; ++b) {
            for (int c = 0; c < 2; ++c) {
              double v = in[static_cast<size_t>(offset[p][a] + offset[q][b] + offset[r][c])];
              v *= weight[p][a];
              v *= weight[q][b];
              v *= weight[r][c];
              sum += v;
            }
          }
        }
        *o++ = sum;
      }
    }
  }
}

int64_t NearestSource(int64_t j, int64_t n, int64_t m) {
  return ClampIndex(static_cast<int64_t>(std::floor(SourceCoordinate(j, n, m) + 0.5)), n);
}

void NearestAlongAxis(const uint8_t* in, size_t element_size, int64_t channels, const Shape& from, int axis,
                      int64_t size, std::vector<uint8_t>* out) {
  const int64_t n = from[static_cast<size_t>(axis)];
  const uint64_t inner = ShapeProduct(Shape(from.begin() + axis + 1, from.end())) * element_size;
  const uint64_t outer = static_cast<uint64_t>(channels) * ShapeProduct(Shape(from.begin(), from.begin() + axis));
  out->resize(outer * static_cast<uint64_t>(size) * inner);
  uint8_t* o = out->data();
  for (uint64_t p = 0; p < outer; ++p) {
    const uint8_t* slab = in + p * static_cast<uint64_t>(n) * inner;
    for (int64_t j = 0; j < size; ++j, o += inner) {
      std::memcpy(o, slab + static_cast<uint64_t>(NearestSource(j, n, size)) * inner, inner);
    }
  }
}

}  // namespace shardify::convert::detail
