// Running moments: count, mean, spread, min and max of a set of values, merged piece by
// piece with one formula wherever statistics are combined: the writer's per-field stats,
// merging parts, and `shardtool stats`. (The Python package's split statistics,
// python/shardify/_dataset.py, spell the same update in numpy.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace shardify {

// Count, mean, sum of squared deviations (m2), min and max of a set of values. Merge()
// combines two disjoint sets exactly (Chan, Golub and LeVeque's pairwise update), so
// moments computed in pieces and merged in order equal one pass up to rounding. Empty
// moments have min +inf and max -inf. A plain value; not thread-safe.
struct Moments {
  uint64_t n = 0;
  double mean = 0, m2 = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  void Merge(const Moments& o) {
    if (o.n == 0) return;
    const double total = static_cast<double>(n + o.n);
    const double delta = o.mean - mean;
    mean += delta * static_cast<double>(o.n) / total;
    m2 += o.m2 + delta * delta * static_cast<double>(n) * static_cast<double>(o.n) / total;
    n += o.n;
    min = std::min(min, o.min);
    max = std::max(max, o.max);
  }
};

}  // namespace shardify
