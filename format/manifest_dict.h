// The manifest's statistics and provenance as dictionaries: the member names, in one
// order, that every place showing them uses (`shardtool info --json`, the Python
// Dataset's `stats` and `provenance`), so that they cannot drift apart. Fields are shown
// differently by each (docs/inspecting.md, docs/python.md) and are not here.
#pragma once

#include "format/manifest.h"

namespace shardify {

// Calls put(name, value) for each member of `s`, in order: "field" (std::string),
// "count" (uint64_t, elements), "min", "max", "mean", "std" (double; the population's
// standard deviation).
template <typename Put>
void ForEachMember(const FieldStats& s, Put&& put) {
  put("field", s.field);
  put("count", s.count);
  put("min", s.min);
  put("max", s.max);
  put("mean", s.mean);
  put("std", s.stddev);
}

// Calls put(name, value) for each member of `p`, in order: "converter",
// "converter_version", "source" (std::string), "options" (std::vector<KeyValue>, shown
// as a dictionary of its keys).
template <typename Put>
void ForEachMember(const Provenance& p, Put&& put) {
  put("converter", p.converter);
  put("converter_version", p.converter_version);
  put("source", p.source);
  put("options", p.options);
}

}  // namespace shardify
