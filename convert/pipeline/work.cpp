// Threaded work of the pipeline (see work_internal.h).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "base/file.h"
#include "base/parallel.h"
#include "convert/pipeline/work_internal.h"
#include "format/fields.h"

namespace shardify::convert::detail {
namespace {

bool IsSet(const std::atomic<bool>* f) { return f != nullptr && f->load(); }

// Joins its threads when destroyed, so no early return leaves one running.
class ThreadGroup {
 public:
  ~ThreadGroup() { Join(); }
  void Add(std::function<void()> fn) { threads_.emplace_back(std::move(fn)); }
  void Join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

 private:
  std::vector<std::thread> threads_;
};

// The sizes of the case's own files (SourcePlan::shared_files count once, after all cases).
uint64_t CaseBytes(const CaseInput& in) {
  uint64_t n = 0;
  for (const auto& p : in.images) n += PathBytes(p);
  if (!in.mask.empty()) n += PathBytes(in.mask);
  return n;
}

}  // namespace

uint64_t PathBytes(const std::string& path) {
  const Result<uint64_t> size = FileSize(path);
  return size.ok() ? *size : 0;
}

Status ParallelFor(size_t n, int threads, const std::atomic<bool>* cancel, const char* phase, ProgressSink* progress,
                   const std::function<void(size_t)>& fn) {
  shardify::ParallelFor(
      n, static_cast<size_t>(std::max(1, threads)), [&](size_t i, size_t) { fn(i); },
      [&](size_t done) {
        if (progress != nullptr) progress->OnProgress(Progress{phase, done, n, 0});
        return !IsSet(cancel);
      });
  if (IsSet(cancel)) return Cancelled("conversion cancelled");
  return Status::Ok();
}

namespace {

// Workers decode, build and compress (each with its own Encoder); the appending thread
// only writes, in input order. Output bytes do not depend on the thread count.
struct Slot {
  bool ready = false;
  EncodedSamplePtr sample;
  Status status;
  uint64_t bytes = 0;
};

CaseReading Reading(const EncodeJob& job) {
  return {job.max_sample_bytes, job.preprocess != nullptr && job.preprocess->options.interprets()};
}

Slot EncodeCase(const EncodeJob& job, size_t case_index, Encoder& encoder) {
  const CaseInput& in = job.plan->cases[case_index];
  Slot s;
  std::vector<uint8_t> cached = std::move((*job.small_files)[case_index]);
  auto data = DecodeCase(in, &cached, Reading(job));
  if (!data.ok()) {
    s.status = data.status();
    return s;
  }
  const uint64_t known = data->image.info.file_bytes;
  s.bytes = in.images.size() == 1 && in.mask.empty() && known > 0 ? known : CaseBytes(in);
  SourceRecord record;
  if (job.preprocess != nullptr) {
    s.status = PreprocessCase(*job.preprocess, in, &*data, &record);
    if (!s.status.ok()) return s;
  }
  auto sample = BuildSample(*job.schema, in, std::move(data).value());
  if (!sample.ok()) {
    s.status = sample.status();
    return s;
  }
  const Schema& schema = *job.schema;
  PutRecord(schema.record, record, &sample->values);
  if (schema.fg_locations >= 0) {
    auto loc =
        FgLocations(schema.fields[schema.mask], sample->values[schema.mask], schema.fg_cap, schema.fg_seed, case_index);
    if (!loc.ok()) {
      s.status = loc.status().WithContext(in.name);
      return s;
    }
    sample->values[schema.fg_locations] = std::move(loc).value();
  }
  auto encoded = encoder.Encode(std::move(sample).value());
  if (!encoded.ok()) {
    s.status = encoded.status().WithContext(in.name);
    return s;
  }
  s.sample = std::move(encoded).value();
  return s;
}

Slot EncodeOne(const EncodeJob& job, size_t case_index, Encoder& encoder) {
  const CaseInput& in = job.plan->cases[case_index];
  Slot s;
  s.status = NoThrow(in.name, [&] {
    s = EncodeCase(job, case_index, encoder);
    return s.status;
  });
  return s;
}

// Bounded reorder window between the encode threads and the appending thread.
struct Sequencer {
  std::mutex mu;
  std::condition_variable ready_cv, space_cv;
  std::vector<Slot> slots;
  size_t consumed = 0;
  bool stop = false;
};

}  // namespace

Result<std::vector<CaseFailure>> EncodeAll(const EncodeJob& job, bool skip, std::vector<size_t>* written,
                                           uint64_t* bytes_in) {
  const std::vector<size_t>& order = *job.order;
  const size_t n = order.size();
  const size_t window = job.window > 0 ? job.window : 16 * static_cast<size_t>(std::max(1, job.threads));
  Sequencer seq;
  seq.slots.resize(window);
  std::atomic<size_t> next{0};
  auto stop_all = [&] {
    std::lock_guard<std::mutex> l(seq.mu);
    seq.stop = true;
    seq.space_cv.notify_all();
  };
  const int threads = std::max(1, job.threads);
  std::vector<std::unique_ptr<Encoder>> encoders;  // made here: NewEncoder is not thread-safe
  for (int t = 0; t < threads; ++t) encoders.push_back(job.writer->NewEncoder());
  ThreadGroup group;
  for (int t = 0; t < threads; ++t) {
    group.Add([&, t] {
      Encoder& encoder = *encoders[static_cast<size_t>(t)];
      for (size_t i; (i = next.fetch_add(1)) < n;) {
        {
          std::unique_lock<std::mutex> l(seq.mu);
          seq.space_cv.wait(l, [&] { return seq.stop || i < seq.consumed + window; });
          if (seq.stop) return;
        }
        Slot s = EncodeOne(job, order[i], encoder);
        bool wake;
        {
          std::lock_guard<std::mutex> l(seq.mu);
          s.ready = true;
          seq.slots[i % window] = std::move(s);
          wake = i == seq.consumed;  // the appender waits for exactly this slot
        }
        if (wake) seq.ready_cv.notify_one();
      }
    });
  }
  std::vector<CaseFailure> failures;
  Status result;
  for (size_t j = 0; j < n && result.ok(); ++j) {
    Slot s;
    {
      std::unique_lock<std::mutex> l(seq.mu);
      while (!seq.slots[j % window].ready && !IsSet(job.cancel))
        seq.ready_cv.wait_for(l, std::chrono::milliseconds(50));
      if (IsSet(job.cancel)) {
        result = Cancelled("conversion cancelled");
        break;
      }
      s = std::move(seq.slots[j % window]);
      seq.slots[j % window] = Slot{};
      seq.consumed = j + 1;
    }
    seq.space_cv.notify_all();
    *bytes_in += s.bytes;
    const CaseInput& in = job.plan->cases[order[j]];
    result = NoThrow(in.name, [&] {  // an exception here would leave the workers waiting
      if (!s.status.ok()) {
        if (!skip) return s.status;
        failures.push_back({in.name, s.status});
        return Status::Ok();
      }
      Status appended = job.writer->Append(std::move(s.sample));
      if (appended.ok()) written->push_back(order[j]);
      return appended;
    });
    if (job.progress != nullptr) job.progress->OnProgress(Progress{"convert", j + 1, n, *bytes_in});
  }
  stop_all();
  group.Join();
  if (!result.ok()) return result;
  return failures;
}

Status TrainDictionaries(const EncodeJob& job, uint64_t max_sample_bytes, ConvertSummary* sum) {
  const SourcePlan& plan = *job.plan;
  const std::vector<size_t>& order = *job.order;
  const uint64_t fit = std::max<uint64_t>(1, kDictionaryInputBudget / std::max<uint64_t>(1, max_sample_bytes));
  const size_t want = static_cast<size_t>(std::min<uint64_t>({order.size(), kDictionaryMaxSamples, fit}));
  std::vector<std::vector<uint8_t>> images(want), masks(want);
  Status st = ParallelFor(want, job.threads, nullptr, "dictionary", nullptr, [&](size_t k) {
    const CaseInput& in = plan.cases[order[k * order.size() / want]];
    const Status read = NoThrow(in.name, [&] {
      auto d = DecodeCase(in, nullptr, Reading(job));
      if (!d.ok()) return d.status();
      SourceRecord record;
      if (job.preprocess != nullptr) RETURN_IF_ERROR(PreprocessCase(*job.preprocess, in, &*d, &record));
      images[k] = std::move(d->image.pixels);
      if (d->has_mask) masks[k] = std::move(d->mask.pixels);
      return Status::Ok();
    });
    if (!read.ok()) images[k].clear(), masks[k].clear();  // such a sample fails later, when it is encoded
  });
  RETURN_IF_ERROR(st);
  DatasetWriter& writer = *job.writer;
  const Schema& schema = *job.schema;
  auto train = [&](const char* field, std::vector<std::vector<uint8_t>>& samples) {
    std::vector<std::vector<uint8_t>> use;
    for (auto& s : samples)
      if (!s.empty()) use.push_back(std::move(s));
    Status t = writer.TrainDictionary(field, use);
    if (!t.ok()) sum->warnings.push_back(std::string("no dictionary for field ") + field + ": " + t.ToString());
    return t.ok();
  };
  sum->dictionary = train(kImageField, images);
  if (schema.mask >= 0) train(kMaskField, masks);
  return Status::Ok();
}

}  // namespace shardify::convert::detail
