#include "tools/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/parallel.h"
#include "format/dataset.h"
#include "format/moments.h"
#include "tools/tool_internal.h"

namespace shardify::tools {

double ChannelStats::stddev() const { return count == 0 ? 0.0 : std::sqrt(m2 / static_cast<double>(count)); }

void ChannelStats::Add(const ChannelStats& o) {
  non_finite += o.non_finite;
  if (o.count == 0) return;
  if (count == 0) {  // taken as it is, without the rounding of a merge
    const uint64_t nf = non_finite;
    *this = o;
    non_finite = nf;
    return;
  }
  Moments m{count, mean, m2, min, max};
  m.Merge(Moments{o.count, o.mean, o.m2, o.min, o.max});
  count = m.n;
  mean = m.mean;
  m2 = m.m2;
  min = m.min;
  max = m.max;
}

namespace {

// Statistics of `n` elements of type `t` at `p` (two passes over the sample's values).
ChannelStats OfElements(const uint8_t* p, size_t n, DType t) {
  ChannelStats s;
  const size_t es = DTypeSize(t);
  double sum = 0;
  for (size_t k = 0; k < n; ++k) {
    const double x = detail::ElementAsDouble(p + k * es, t);
    if (!std::isfinite(x)) {
      ++s.non_finite;
      continue;
    }
    if (s.count == 0 || x < s.min) s.min = x;
    if (s.count == 0 || x > s.max) s.max = x;
    sum += x;
    ++s.count;
  }
  if (s.count == 0) return s;
  s.mean = sum / static_cast<double>(s.count);
  for (size_t k = 0; k < n; ++k) {
    const double x = detail::ElementAsDouble(p + k * es, t);
    if (std::isfinite(x)) s.m2 += (x - s.mean) * (x - s.mean);
  }
  return s;
}

Status AddSample(const Dataset& ds, uint64_t i, int label, Decoder& d, std::vector<uint8_t>& buf, StatsReport& r) {
  const Manifest& m = ds.manifest();
  ASSIGN_OR_RETURN(SampleView s, ds.Sample(i));
  size_t fi = 0;
  for (size_t f = 0; f < m.fields.size(); ++f) {
    if (m.fields[f].kind != FieldKind::kNdarray) continue;
    ASSIGN_OR_RETURN(Shape shape, s.shape(f));
    ASSIGN_OR_RETURN(uint64_t raw, s.raw_size(f));
    if (buf.size() < raw) buf.resize(raw);
    RETURN_IF_ERROR(s.Decode(f, buf.data(), buf.size(), d));
    const size_t channels = shape.size() >= 3 && shape[0] > 0 ? static_cast<size_t>(shape[0]) : 1;
    const size_t per = raw / DTypeSize(m.fields[f].dtype) / channels;
    auto& out = r.fields[fi++].channels;
    if (out.size() < channels) out.resize(channels);
    for (size_t c = 0; c < channels; ++c) {
      out[c].Add(OfElements(buf.data() + c * per * DTypeSize(m.fields[f].dtype), per, m.fields[f].dtype));
    }
  }
  if (label >= 0) {
    ASSIGN_OR_RETURN(int64_t v, s.int_value(label));
    ++r.labels[v];
  }
  ++r.samples;
  return Status::Ok();
}

StatsReport EmptyReport(const Manifest& m) {
  StatsReport r;
  for (const FieldSpec& f : m.fields) {
    if (f.kind == FieldKind::kNdarray) r.fields.push_back({f.name, DTypeName(f.dtype), {}});
  }
  return r;
}

void Merge(StatsReport& into, const StatsReport& part) {
  into.samples += part.samples;
  for (size_t f = 0; f < into.fields.size(); ++f) {
    auto& a = into.fields[f].channels;
    const auto& b = part.fields[f].channels;
    if (a.size() < b.size()) a.resize(b.size());
    for (size_t c = 0; c < b.size(); ++c) a[c].Add(b[c]);
  }
  for (const auto& [label, n] : part.labels) into.labels[label] += n;
}

}  // namespace

Result<StatsReport> ComputeStats(const std::string& dir, const StatsOptions& options) {
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, options.io));
  const Manifest& m = ds->manifest();
  ASSIGN_OR_RETURN(detail::Range range, detail::SplitRange(m, options.split));
  if (options.limit > 0 && range.end - range.first > options.limit) range.end = range.first + options.limit;
  const int label = detail::FindLabelField(m);
  const uint64_t n = range.end - range.first;
  const size_t threads = WorkerCount(options.threads, n);
  std::vector<StatsReport> parts(threads, EmptyReport(m));
  std::vector<Status> errors(threads);
  // Fixed contiguous parts, summed in order: the same figures for the same thread count.
  ParallelFor(threads, threads, [&](size_t t, size_t) {
    Decoder d;
    std::vector<uint8_t> buf;
    const uint64_t lo = range.first + n * t / threads, hi = range.first + n * (t + 1) / threads;
    for (uint64_t i = lo; i < hi && errors[t].ok(); ++i) errors[t] = AddSample(*ds, i, label, d, buf, parts[t]);
  });
  StatsReport report = EmptyReport(m);
  for (size_t t = 0; t < threads; ++t) {
    RETURN_IF_ERROR(errors[t]);
    Merge(report, parts[t]);
  }
  return report;
}

namespace {

nlohmann::json StatsJson(const Manifest& m, const StatsReport& r) {
  nlohmann::json fields = nlohmann::json::array();
  for (const FieldChannelStats& f : r.fields) {
    nlohmann::json channels = nlohmann::json::array();
    for (size_t c = 0; c < f.channels.size(); ++c) {
      const ChannelStats& s = f.channels[c];
      channels.push_back({{"channel", c},
                          {"count", s.count},
                          {"min", s.min},
                          {"max", s.max},
                          {"mean", s.mean},
                          {"std", s.stddev()},
                          {"non_finite", s.non_finite}});
    }
    fields.push_back({{"name", f.field}, {"dtype", f.dtype}, {"channels", channels}});
  }
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& [label, count] : r.labels) {
    hist.push_back({{"label", label}, {"class", detail::ClassName(m, label)}, {"count", count}});
  }
  return {{"samples", r.samples}, {"fields", fields}, {"label_histogram", hist}};
}

void StatsText(const Manifest& m, const StatsReport& r, std::ostream& out) {
  char line[256];
  for (const FieldChannelStats& f : r.fields) {
    out << "field " << f.field << " (" << f.dtype << ")\n";
    std::snprintf(line, sizeof line, "  %7s %14s %14s %14s %14s %14s\n", "channel", "count", "min", "max", "mean",
                  "std");
    out << line;
    for (size_t c = 0; c < f.channels.size(); ++c) {
      const ChannelStats& s = f.channels[c];
      std::snprintf(line, sizeof line, "  %7zu %14llu %14.6g %14.6g %14.6g %14.6g\n", c,
                    static_cast<unsigned long long>(s.count), s.min, s.max, s.mean, s.stddev());
      out << line;
      if (s.non_finite > 0) out << "          (" << s.non_finite << " NaN/inf values left out)\n";
    }
  }
  if (r.labels.empty()) return;
  out << "label histogram\n";
  for (const auto& [label, count] : r.labels) {
    const double pct = 100.0 * static_cast<double>(count) / static_cast<double>(std::max<uint64_t>(1, r.samples));
    std::snprintf(line, sizeof line, "  %6lld %-24s %10llu %6.2f%%\n", static_cast<long long>(label),
                  detail::ClassName(m, label).c_str(), static_cast<unsigned long long>(count), pct);
    out << line;
  }
}

}  // namespace

Status RunStats(const std::string& dir, const StatsOptions& options, std::ostream& out) {
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, options.io));
  if (!options.json) {
    out << "stats of " << ds->dir() << (options.split.empty() ? "" : " split " + options.split) << " ("
        << ds->num_samples() << " samples in the dataset)\n"
        << std::flush;
  }
  ASSIGN_OR_RETURN(StatsReport r, ComputeStats(dir, options));
  if (options.json) {
    out << detail::Dump(StatsJson(ds->manifest(), r)) << "\n";
  } else {
    out << r.samples << " samples read\n";
    StatsText(ds->manifest(), r, out);
  }
  out.flush();
  return Status::Ok();
}

}  // namespace shardify::tools
