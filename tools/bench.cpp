#include "tools/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "base/parallel.h"
#include "format/dataset.h"
#include "tools/tool_internal.h"

#ifdef SHARDIFY_TOOLS_WITH_READER
#include "reader/bench.h"
#include "reader/loader.h"
#include "reader/patch_sampler.h"
#include "storage/location.h"
#endif

namespace shardify::tools {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Seeded Fisher-Yates shuffle of [first, end), reproducible on every platform.
std::vector<uint64_t> Permutation(uint64_t first, uint64_t end, uint64_t seed) {
  std::vector<uint64_t> v(end - first);
  std::iota(v.begin(), v.end(), first);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = v.size(); i > 1; --i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    std::swap(v[i - 1], v[state % i]);
  }
  return v;
}

// Decodes every ndarray field of the samples in `order`; returns decoded bytes.
Result<uint64_t> DecodeRange(const Dataset& ds, const std::vector<uint64_t>& order, std::atomic<size_t>& next,
                             size_t batch) {
  const Manifest& m = ds.manifest();
  Decoder d;
  std::vector<uint8_t> buf;
  uint64_t bytes = 0;
  for (size_t lo; (lo = next.fetch_add(batch)) < order.size();) {
    for (size_t k = lo; k < std::min(order.size(), lo + batch); ++k) {
      ASSIGN_OR_RETURN(SampleView s, ds.Sample(order[k]));
      for (size_t f = 0; f < m.fields.size(); ++f) {
        if (m.fields[f].kind != FieldKind::kNdarray) continue;
        ASSIGN_OR_RETURN(uint64_t raw, s.raw_size(f));
        if (buf.size() < raw) buf.resize(raw);
        RETURN_IF_ERROR(s.Decode(f, buf.data(), buf.size(), d));
        bytes += raw;
      }
    }
  }
  return bytes;
}

Result<BenchResult> BenchDirect(const std::string& dir, const BenchOptions& o, const std::string& split) {
  const Clock::time_point t0 = Clock::now();
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, o.io));
  ASSIGN_OR_RETURN(detail::Range range, detail::SplitRange(ds->manifest(), split));
  RETURN_IF_ERROR(ds->CheckSampleCounts(range.first, range.end - range.first));
  const size_t threads = WorkerCount(o.threads, SIZE_MAX);
  BenchResult r;
  r.mode = "direct";
  for (uint64_t e = 0; e < o.epochs; ++e) {
    const std::vector<uint64_t> order = Permutation(range.first, range.end, o.seed + e);
    std::atomic<size_t> next{0};
    std::vector<Result<uint64_t>> out(threads, Result<uint64_t>(uint64_t{0}));
    ParallelFor(threads, threads, [&](size_t t, size_t) { out[t] = DecodeRange(*ds, order, next, o.batch); });
    for (const auto& b : out) {
      RETURN_IF_ERROR(b.status());
      r.bytes += *b;
    }
    r.samples += order.size();
  }
  r.seconds = Since(t0);
  return r;
}

#ifdef SHARDIFY_TOOLS_WITH_READER
Result<BenchResult> BenchLoader(const std::string& dir, const BenchOptions& o, const std::string& split) {
  LoaderOptions lo;
  lo.split = split;
  lo.batch_size = o.batch;
  lo.threads = o.threads;
  lo.sampler.order = SampleOrder::kShuffle;
  lo.sampler.seed = o.seed;
  lo.sampler.epochs = o.epochs;
  lo.io = o.io;
  ASSIGN_OR_RETURN(LoaderBenchResult lr, RunLoaderBench(dir, lo));
  BenchResult r;
  r.mode = "loader";
  r.samples = lr.samples;
  r.bytes = lr.bytes;
  r.seconds = lr.seconds;
  return r;
}
#endif

// The --patch value: exactly three positive integers joined by 'x'.
Result<Shape> ParsePatch(const std::string& text) {
  Result<Shape> patch = ParseExtents(text);
  if (!patch.ok() || patch->size() != 3) {
    return InvalidArgument("--patch: expected DxHxW, three positive integers such as 128x128x128, got '" + text + "'");
  }
  return patch;
}

#ifdef SHARDIFY_TOOLS_WITH_READER
// What patch mode reads, opened and sized before any clock starts.
struct PatchSetup {
  std::unique_ptr<Dataset> ds;
  std::unique_ptr<PatchSampler> sampler;
  size_t image = 0;  // field index of "image"
  detail::Range range;
  std::vector<uint64_t> image_patch, label_patch, volume;  // bytes per sample of the split
  uint64_t max_image_patch = 0, max_label_patch = 0, max_volume = 0;
};

struct PhaseTotals {
  uint64_t items = 0, bytes = 0, chunks = 0;
};

// Opens the dataset, checks it has an "image" ndarray of rank >= the patch's, creates
// the sampler (label "mask" when there is one) and sizes every sample of the split.
Result<PatchSetup> SetUpPatches(const std::string& dir, const BenchOptions& o, const std::string& split,
                                const Shape& patch) {
  PatchSetup s;
  ASSIGN_OR_RETURN(s.ds, detail::OpenDataset(dir, o.io));
  const Manifest& m = s.ds->manifest();
  const int image = m.FindField(kImageField);
  if (image < 0 || m.fields[image].kind != FieldKind::kNdarray)
    return NotFound("--patch reads the ndarray field 'image', and " + s.ds->dir() + " has none");
  s.image = static_cast<size_t>(image);
  const Shape& shape = m.fields[s.image].shape;
  if (shape.size() < patch.size())
    return InvalidArgument("--patch " + ExtentsToString(patch) + " has " + std::to_string(patch.size()) +
                           " axes, more than the rank of field 'image' " + ShapeToString(shape) + " of " + s.ds->dir());
  PatchOptions po;
  po.patch = patch;
  po.seed = o.seed;
  const int mask = m.FindField(kMaskField);
  po.label_field = mask >= 0 && m.fields[mask].kind == FieldKind::kNdarray ? kMaskField : "";
  ASSIGN_OR_RETURN(s.sampler, PatchSampler::Create(s.ds.get(), std::move(po)));
  ASSIGN_OR_RETURN(s.range, detail::SplitRange(m, split));
  RETURN_IF_ERROR(s.ds->CheckSampleCounts(s.range.first, s.range.end - s.range.first));
  if (s.range.end == s.range.first)
    return InvalidArgument("split '" + split + "' of " + s.ds->dir() + " has no samples");
  const uint64_t limit = s.ds->options().max_sample_bytes;
  for (uint64_t i = s.range.first; i < s.range.end; ++i) {
    ASSIGN_OR_RETURN(uint64_t ip, s.sampler->ImageBytes(i));
    ASSIGN_OR_RETURN(uint64_t lp, s.sampler->LabelBytes(i));
    ASSIGN_OR_RETURN(SampleView v, s.ds->Sample(i));
    ASSIGN_OR_RETURN(uint64_t raw, v.raw_size(s.image));
    if (ip > limit || lp > limit)
      return ResourceExhausted("--patch " + ExtentsToString(patch) + ": a patch of sample " + std::to_string(i) +
                               " needs " + detail::HumanBytes(std::max(ip, lp)) + ", more than the limit of " +
                               detail::HumanBytes(limit));
    s.image_patch.push_back(ip), s.label_patch.push_back(lp), s.volume.push_back(raw);
    s.max_image_patch = std::max(s.max_image_patch, ip);
    s.max_label_patch = std::max(s.max_label_patch, lp);
    s.max_volume = std::max(s.max_volume, raw);
  }
  return s;
}

// Runs body(t) on `threads` threads and adds up what they return; the first error wins.
template <typename Body>
Result<PhaseTotals> OnThreads(size_t threads, Body body) {
  std::vector<Result<PhaseTotals>> out(threads, Result<PhaseTotals>(PhaseTotals{}));
  ParallelFor(threads, threads, [&](size_t t, size_t) { out[t] = body(t); });
  PhaseTotals sum;
  for (const auto& r : out) {
    RETURN_IF_ERROR(r.status());
    sum.items += r->items, sum.bytes += r->bytes, sum.chunks += r->chunks;
  }
  return sum;
}

// Draws patches k = next++ < count: sample order[k % n], draw k / n, forced by slot k % batch.
Result<PhaseTotals> DrawPatches(const PatchSetup& s, const std::vector<uint64_t>& order, uint64_t count, size_t batch,
                                std::atomic<uint64_t>& next, std::vector<uint8_t>& image, std::vector<uint8_t>& label) {
  Decoder d;
  PhaseTotals t;
  for (uint64_t k; (k = next.fetch_add(1)) < count;) {
    const uint64_t index = order[k % order.size()], at = index - s.range.first;
    const bool forced = s.sampler->Forced(k % batch, batch);
    RETURN_IF_ERROR(
        s.sampler->Sample(index, k / order.size(), forced, image.data(), image.size(), label.data(), label.size(), d));
    ++t.items;
    t.bytes += s.image_patch[at] + s.label_patch[at];
  }
  t.chunks = d.chunks_decoded();
  return t;
}

// Decodes the whole image field of samples order[next++].
Result<PhaseTotals> DecodeVolumes(const PatchSetup& s, const std::vector<uint64_t>& order, std::atomic<uint64_t>& next,
                                  std::vector<uint8_t>& buf) {
  Decoder d;
  PhaseTotals t;
  for (uint64_t k; (k = next.fetch_add(1)) < order.size();) {
    ASSIGN_OR_RETURN(SampleView v, s.ds->Sample(order[k]));
    RETURN_IF_ERROR(v.Decode(s.image, buf.data(), buf.size(), d));
    ++t.items;
    t.bytes += s.volume[order[k] - s.range.first];
  }
  t.chunks = d.chunks_decoded();
  return t;
}

Result<BenchResult> BenchPatches(const std::string& dir, const BenchOptions& o, const std::string& split,
                                 const Shape& patch) {
  const Clock::time_point t0 = Clock::now();
  ASSIGN_OR_RETURN(const PatchSetup s, SetUpPatches(dir, o, split, patch));
  const size_t threads = WorkerCount(o.threads, SIZE_MAX);
  const uint64_t n = s.range.end - s.range.first;
  const uint64_t count = o.patches ? o.patches : std::max<uint64_t>(32, 8 * n);
  BenchResult r;
  r.mode = "patch";
  r.patch.patch = patch;
  r.patch.label_field = s.sampler->options().label_field;
  // Buffers are allocated (and zeroed, so mapped) before the clock starts; never empty, so
  // a split whose masks have no channels (unlabeled cases) still passes a real pointer.
  auto buffers = [threads](uint64_t bytes) {
    return std::vector<std::vector<uint8_t>>(threads, std::vector<uint8_t>(std::max<uint64_t>(bytes, 1)));
  };
  {
    const std::vector<uint64_t> order = Permutation(s.range.first, s.range.end, o.seed);
    std::vector<std::vector<uint8_t>> image = buffers(s.max_image_patch), label = buffers(s.max_label_patch);
    std::atomic<uint64_t> next{0};
    const Clock::time_point tp = Clock::now();
    ASSIGN_OR_RETURN(PhaseTotals p, OnThreads(threads, [&](size_t t) {
                       return DrawPatches(s, order, count, o.batch, next, image[t], label[t]);
                     }));
    r.patch.patch_seconds = Since(tp);
    r.patch.patches = p.items, r.patch.patch_bytes = p.bytes, r.patch.chunks = p.chunks;
  }
  std::vector<uint64_t> order;
  for (uint64_t e = 0; e < o.epochs; ++e) {
    const std::vector<uint64_t> epoch = Permutation(s.range.first, s.range.end, o.seed + e);
    order.insert(order.end(), epoch.begin(), epoch.end());
  }
  std::vector<std::vector<uint8_t>> bufs = buffers(s.max_volume);
  std::atomic<uint64_t> next{0};
  const Clock::time_point tv = Clock::now();
  ASSIGN_OR_RETURN(PhaseTotals v, OnThreads(threads, [&](size_t t) { return DecodeVolumes(s, order, next, bufs[t]); }));
  r.patch.volume_seconds = Since(tv);
  r.patch.volumes = v.items, r.patch.volume_bytes = v.bytes;
  r.samples = v.items;
  r.bytes = r.patch.patch_bytes + r.patch.volume_bytes;
  r.seconds = Since(t0);
  return r;
}
#endif

Result<std::string> ChooseSplit(const std::string& dir, const std::string& split) {
  if (!split.empty()) return split;
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, IoMode::kMmap));  // the manifest only
  if (ds->manifest().splits.empty()) return NotFound("dataset " + ds->dir() + " has no splits");
  return ds->manifest().splits.front().name;
}

}  // namespace

Result<BenchResult> Bench(const std::string& dir, const BenchOptions& options) {
  if (options.batch == 0 || options.epochs == 0) return InvalidArgument("--batch and --epochs must be >= 1");
  if (!options.patch.empty()) {
    ASSIGN_OR_RETURN(const Shape patch, ParsePatch(options.patch));
#ifdef SHARDIFY_TOOLS_WITH_READER
    ASSIGN_OR_RETURN(std::string split, ChooseSplit(dir, options.split));
    return BenchPatches(dir, options, split, patch);
#else
    return Unsupported("--patch " + ExtentsToString(patch) +
                       " draws patches with the reader library's PatchSampler, and this shardtool was built "
                       "without reader/");
#endif
  }
  ASSIGN_OR_RETURN(std::string split, ChooseSplit(dir, options.split));
#ifdef SHARDIFY_TOOLS_WITH_READER
  if (!options.direct) return BenchLoader(dir, options, split);
#endif
  return BenchDirect(dir, options, split);
}

namespace {

void PrintPatchJson(const BenchResult& r, const BenchOptions& o, std::ostream& out) {
  const PatchBench& p = r.patch;
  out << detail::Dump({{"mode", r.mode},
                       {"patch", p.patch},
                       {"label_field", p.label_field},
                       {"patches", p.patches},
                       {"patch_bytes", p.patch_bytes},
                       {"patch_seconds", p.patch_seconds},
                       {"patches_per_s", p.patches_per_s()},
                       {"chunks", p.chunks},
                       {"chunks_per_patch", p.chunks_per_patch()},
                       {"volumes", p.volumes},
                       {"volume_bytes", p.volume_bytes},
                       {"volume_seconds", p.volume_seconds},
                       {"full_volumes_per_s", p.full_volumes_per_s()},
                       {"speedup", p.speedup()},
                       {"bytes", r.bytes},
                       {"seconds", r.seconds},
                       {"threads", o.threads},
                       {"epochs", o.epochs},
                       {"seed", o.seed}})
      << "\n";
}

void PrintPatchText(const BenchResult& r, std::ostream& out) {
  const PatchBench& p = r.patch;
  const std::string what = ExtentsToString(p.patch) + (p.label_field.empty() ? "" : " with " + p.label_field);
  char line[512];
  std::snprintf(line, sizeof line,
                "patches %s: %llu, %s in %.3f s: %.1f patches/s, %.1f MB/s, %.2f chunks/patch\n"
                "whole volumes: %llu, %s in %.3f s: %.2f volumes/s, %.1f MB/s\n"
                "patches/s over volumes/s: %.1fx\n",
                what.c_str(), static_cast<unsigned long long>(p.patches), detail::HumanBytes(p.patch_bytes).c_str(),
                p.patch_seconds, p.patches_per_s(), p.patch_seconds > 0 ? p.patch_bytes / p.patch_seconds / 1e6 : 0,
                p.chunks_per_patch(), static_cast<unsigned long long>(p.volumes),
                detail::HumanBytes(p.volume_bytes).c_str(), p.volume_seconds, p.full_volumes_per_s(),
                p.volume_seconds > 0 ? p.volume_bytes / p.volume_seconds / 1e6 : 0, p.speedup());
  out << line;
}

}  // namespace

Status RunBench(const std::string& dir, const BenchOptions& options, std::ostream& out) {
  if (!options.json && !options.patch.empty()) {
    ASSIGN_OR_RETURN(const Shape patch, ParsePatch(options.patch));
    out << "reading " << storage::ShownLocation(dir) << (options.split.empty() ? "" : " split " + options.split)
        << ": random patches of " << ExtentsToString(patch) << ", then " << options.epochs
        << " epoch(s) of whole volumes, threads " << (options.threads ? std::to_string(options.threads) : "all")
        << "...\n"
        << std::flush;
  } else if (!options.json) {
    out << "reading " << storage::ShownLocation(dir) << (options.split.empty() ? "" : " split " + options.split) << ", "
        << options.epochs << " epoch(s), batch " << options.batch << ", threads "
        << (options.threads ? std::to_string(options.threads) : "all") << "...\n"
        << std::flush;
  }
  ASSIGN_OR_RETURN(BenchResult r, Bench(dir, options));
  if (r.mode == "patch") {
    if (options.json) {
      PrintPatchJson(r, options, out);
    } else {
      PrintPatchText(r, out);
    }
  } else if (options.json) {
    out << detail::Dump({{"mode", r.mode},
                         {"samples", r.samples},
                         {"bytes", r.bytes},
                         {"seconds", r.seconds},
                         {"samples_per_s", r.samples_per_s()},
                         {"bytes_per_s", r.bytes_per_s()},
                         {"batch", options.batch},
                         {"threads", options.threads},
                         {"epochs", options.epochs}})
        << "\n";
  } else {
    char line[256];
    std::snprintf(line, sizeof line, "%s: %llu samples, %s in %.3f s: %.0f samples/s, %.1f MB/s\n", r.mode.c_str(),
                  static_cast<unsigned long long>(r.samples), detail::HumanBytes(r.bytes).c_str(), r.seconds,
                  r.samples_per_s(), r.bytes_per_s() / 1e6);
    out << line;
  }
  out.flush();
  return Status::Ok();
}

}  // namespace shardify::tools
