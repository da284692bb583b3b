#include "tools/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <thread>
#include <vector>

#include "format/dataset.h"
#include "tools/tool_internal.h"

#ifdef SHARDIFY_TOOLS_WITH_READER
#include "reader/bench.h"
#include "reader/loader.h"
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
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, true));
  ASSIGN_OR_RETURN(detail::Range range, detail::SplitRange(ds->manifest(), split));
  const size_t threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  BenchResult r;
  r.mode = "direct";
  for (uint64_t e = 0; e < o.epochs; ++e) {
    const std::vector<uint64_t> order = Permutation(range.first, range.end, o.seed + e);
    std::atomic<size_t> next{0};
    std::vector<Result<uint64_t>> out(threads, Result<uint64_t>(uint64_t{0}));
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { out[t] = DecodeRange(*ds, order, next, o.batch); });
    }
    for (std::thread& t : pool) t.join();
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
  ASSIGN_OR_RETURN(LoaderBenchResult lr, RunLoaderBench(dir, lo));
  BenchResult r;
  r.mode = "loader";
  r.samples = lr.samples;
  r.bytes = lr.bytes;
  r.seconds = lr.seconds;
  return r;
}
#endif

Result<std::string> ChooseSplit(const std::string& dir, const std::string& split) {
  if (!split.empty()) return split;
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, true));
  if (ds->manifest().splits.empty()) return NotFound("dataset " + dir + " has no splits");
  return ds->manifest().splits.front().name;
}

}  // namespace

Result<BenchResult> Bench(const std::string& dir, const BenchOptions& options) {
  if (options.batch == 0 || options.epochs == 0) return InvalidArgument("--batch and --epochs must be >= 1");
  ASSIGN_OR_RETURN(std::string split, ChooseSplit(dir, options.split));
#ifdef SHARDIFY_TOOLS_WITH_READER
  if (!options.direct) return BenchLoader(dir, options, split);
#endif
  return BenchDirect(dir, options, split);
}

Status RunBench(const std::string& dir, const BenchOptions& options, std::ostream& out) {
  if (!options.json) {
    out << "reading " << dir << (options.split.empty() ? "" : " split " + options.split) << ", " << options.epochs
        << " epoch(s), batch " << options.batch << ", threads "
        << (options.threads ? std::to_string(options.threads) : "all") << "...\n"
        << std::flush;
  }
  ASSIGN_OR_RETURN(BenchResult r, Bench(dir, options));
  if (options.json) {
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
