#include "tools/verify.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "base/file.h"
#include "base/parallel.h"
#include "format/dataset.h"
#include "format/layout.h"
#include "storage/location.h"
#include "tools/tool_internal.h"

namespace shardify::tools {

std::string VerifyProblem::ToString() const {
  return "shard " + shard + " sample " + (sample ? std::to_string(*sample) : "-") + ": " + what;
}

namespace {

struct ShardResult {
  std::vector<VerifyProblem> problems;
  uint64_t samples = 0;
  uint64_t blobs = 0;
  bool done = false;
  Status error;  // an I/O error: it ends the check (a refused, failed or stalled transfer)
};

// A problem is what the data holds (damaged or missing bytes); an I/O error says nothing
// about the data and ends the check, as the error of the run (exit code 2, not 1).
bool EndsCheck(const Status& st) { return st.code() == StatusCode::kIOError; }

// Returns false when the file is missing or has the wrong size (recorded as a problem).
bool CheckFileSize(const std::string& dir, const ShardInfo& info, ShardResult& r) {
  if (storage::IsRemote(dir)) return true;  // the cache refuses a download of another size, naming it
  struct stat st {};
  const std::string path = JoinPath(dir, info.file_name);
  if (::stat(path.c_str(), &st) != 0) {
    r.problems.push_back({info.file_name, std::nullopt, "missing (" + path + " cannot be read)"});
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) != info.size_bytes) {
    r.problems.push_back({info.file_name, std::nullopt,
                          "size " + std::to_string(st.st_size) + " bytes, manifest says " +
                              std::to_string(info.size_bytes) + " (truncated or appended to)"});
    return false;
  }
  return true;
}

// The error without the "<dir>/<file> sample <i> " it starts with (the problem line names
// shard and sample already), so what is left reads "field 'image': blob checksum ...".
std::string WithoutPrefix(const std::string& message, const std::string& dir, const std::string& file,
                          uint64_t sample) {
  const std::string prefix = JoinPath(dir, file) + " sample " + std::to_string(sample) + " ";
  if (message.compare(0, prefix.size(), prefix) == 0) return message.substr(prefix.size());
  return message;
}

void CheckBlobs(const Dataset& ds, const ShardInfo& info, Decoder& d, std::vector<uint8_t>& buf, ShardResult& r) {
  const Manifest& m = ds.manifest();
  for (uint64_t i = info.first_sample; i < info.first_sample + info.num_samples; ++i) {
    auto s = ds.Sample(i);
    if (!s.ok() && EndsCheck(s.status())) {
      r.error = s.status();
      return;
    }
    if (!s.ok()) {
      r.problems.push_back({info.file_name, i, s.status().message()});
      continue;
    }
    for (size_t f = 0; f < m.fields.size(); ++f) {
      if (m.fields[f].kind != FieldKind::kNdarray) continue;
      auto raw = s->raw_size(f);
      Status st = raw.status();
      if (st.ok()) {
        if (buf.size() < *raw) buf.resize(*raw);
        st = s->Decode(f, buf.data(), buf.size(), d);
      }
      if (!st.ok()) {
        r.problems.push_back({info.file_name, i, WithoutPrefix(st.message(), ds.dir(), info.file_name, i)});
      } else {
        ++r.blobs;
      }
    }
    ++r.samples;
  }
}

void CheckOneShard(const Dataset& ds, size_t n, bool quick, Decoder& d, std::vector<uint8_t>& buf, ShardResult& r) {
  const ShardInfo& info = ds.manifest().shards[n];
  if (!CheckFileSize(ds.dir(), info, r)) return;
  Status st = ds.CheckShard(n);
  if (!st.ok()) {
    if (EndsCheck(st)) {
      r.error = std::move(st);
    } else {
      r.problems.push_back({info.file_name, std::nullopt, st.message()});
    }
    return;
  }
  if (quick) {
    r.samples = info.num_samples;  // their index entries, checked with the shard
  } else {
    CheckBlobs(ds, info, d, buf, r);
  }
}

// Checks shards on `threads` workers; hands results to `emit` in shard order. After an
// I/O error the shards not begun yet are not checked.
void CheckAllShards(const Dataset& ds, const VerifyOptions& options, const std::function<void(ShardResult&)>& emit) {
  const size_t count = ds.manifest().shards.size();
  const size_t threads = WorkerCount(options.threads, count);
  std::vector<ShardResult> results(count);
  std::vector<Decoder> decoders(threads);
  std::vector<std::vector<uint8_t>> buffers(threads);
  std::mutex mu;
  std::atomic<bool> failed{false};
  size_t emitted = 0;
  ParallelFor(
      count, threads,
      [&](size_t n, size_t w) {
        ShardResult r;
        if (!failed) CheckOneShard(ds, n, options.quick, decoders[w], buffers[w], r);
        if (!r.error.ok()) failed = true;
        std::lock_guard<std::mutex> lock(mu);
        results[n] = std::move(r);
        results[n].done = true;
      },
      [&](size_t) {  // on this thread, in shard order, as soon as each is checked
        for (;;) {
          std::unique_lock<std::mutex> lock(mu);
          if (emitted == count || !results[emitted].done) return true;
          ShardResult r = std::move(results[emitted++]);
          lock.unlock();
          emit(r);
        }
      });
}

}  // namespace

Result<VerifyReport> VerifyDataset(const std::string& dir, const VerifyOptions& options,
                                   const std::function<void(const VerifyProblem&)>& on_problem) {
  VerifyReport report;
  auto add = [&](VerifyProblem p) {
    if (on_problem) on_problem(p);
    report.problems.push_back(std::move(p));
  };
  ReadOptions read;
  read.io = options.io;
  auto ds = Dataset::Open(dir, read);
  if (!ds.ok()) {
    if (ds.status().code() != StatusCode::kCorruption && ds.status().code() != StatusCode::kUnsupported) {
      return ds.status().WithContext("dataset " + storage::ShownLocation(dir));
    }
    add({kManifestFileName, std::nullopt, ds.status().message()});
    return report;
  }
  Status error;
  CheckAllShards(**ds, options, [&](ShardResult& r) {
    if (!error.ok() || !r.error.ok()) {
      if (error.ok()) error = std::move(r.error);
      return;
    }
    ++report.shards;
    report.samples += r.samples;
    report.blobs += r.blobs;
    for (VerifyProblem& p : r.problems) add(std::move(p));
  });
  if (!error.ok()) return error.WithContext("dataset " + (*ds)->dir());
  return report;
}

namespace {

Status Summary(const std::string& dir, const VerifyReport& r) {
  if (r.ok()) return Status::Ok();
  return Corruption(std::to_string(r.problems.size()) + " problem(s) in " + storage::ShownLocation(dir));
}

// The JSON report, with each problem written as it is found.
Status VerifyJson(const std::string& dir, const VerifyOptions& options, std::ostream& out) {
  detail::JsonObjectStream o(out);
  o.Put("dataset", storage::ShownLocation(dir));
  o.Put("quick", options.quick);
  o.BeginArray("problems");
  auto item = [&](const VerifyProblem& p) {
    o.Item({{"shard", p.shard}, {"sample", p.sample ? nlohmann::json(*p.sample) : nlohmann::json()}, {"what", p.what}});
    out.flush();
  };
  auto report = VerifyDataset(dir, options, item);
  o.EndArray();
  if (!report.ok()) {  // keep the output valid JSON; the error goes to the caller
    o.Put("error", report.status().ToString());
    o.End();
    return report.status();
  }
  const VerifyReport& r = *report;
  o.Put("ok", r.ok());
  o.Put("shards", r.shards);
  o.Put("samples", r.samples);
  o.Put("blobs", r.blobs);
  o.End();
  return Summary(dir, r);
}

}  // namespace

Status RunVerify(const std::string& dir, const VerifyOptions& options, std::ostream& out) {
  if (options.json) return VerifyJson(dir, options, out);
  out << "verifying " << storage::ShownLocation(dir) << (options.quick ? " (structure only)" : "") << "\n"
      << std::flush;
  auto print = [&](const VerifyProblem& p) { out << p.ToString() << "\n" << std::flush; };
  ASSIGN_OR_RETURN(VerifyReport r, VerifyDataset(dir, options, print));
  out << (r.ok() ? "ok: " : "FAILED: ") << r.shards << " shards, " << r.samples << " samples, ";
  if (options.quick) {
    out << "structure checked (file sizes, shard ends, footers, indices; no blob decoded or checksummed: "
           "verify without --quick checks every blob), ";
  } else {
    out << r.blobs << " blobs checked, ";
  }
  out << r.problems.size() << " problem(s)\n" << std::flush;
  return Summary(dir, r);
}

}  // namespace shardify::tools
