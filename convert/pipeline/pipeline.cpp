// The conversion pipeline (see convert.h): plan, inspect, schema, splits, encode, write.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>

#include "base/file.h"
#include "base/parallel.h"
#include "convert/convert.h"
#include "convert/pipeline/parts_internal.h"
#include "convert/pipeline/upload_internal.h"
#include "convert/pipeline/work_internal.h"
#include "convert/preprocess/integrity_internal.h"
#include "convert/preprocess/intensity_internal.h"
#include "convert/preprocess/plans.h"
#include "convert/preprocess/plans_internal.h"
#include "convert/sources/schema_internal.h"
#include "convert/sources/source_internal.h"
#include "format/writer.h"
#include "storage/location.h"

#ifndef SHARDIFY_VERSION
#define SHARDIFY_VERSION "0.0.0"
#endif

namespace fs = std::filesystem;

namespace shardify::convert {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes of small source files kept in memory between inspection and decoding.
constexpr uint64_t kSmallFileBudget = 256ull << 20;
// Decoded bytes the reorder window aims to hold at most (large volumes shrink it).
constexpr uint64_t kWindowBudget = 1ull << 30;

bool IsCancelled(const ConvertOptions& o) { return o.cancel != nullptr && o.cancel->load(); }

// Records a per-input failure: fails the run, or lists the input as skipped.
Status Fail(const ConvertOptions& o, ConvertSummary* sum, const std::string& input, const Status& s) {
  if (!o.skip_errors) return s;
  sum->skipped.push_back({input, s.ToString()});
  return Status::Ok();
}

CaseReading CaseReadingOf(const ConvertOptions& o) { return {o.max_sample_bytes, o.preprocess.interprets()}; }

// Reads every case's headers on `threads` threads.
Status InspectAll(const SourcePlan& plan, const ConvertOptions& o, int threads, ProgressSink* progress,
                  std::vector<CaseInfo>* infos, std::vector<bool>* ok, std::vector<Status>* errors) {
  const size_t n = plan.cases.size();
  infos->assign(n, CaseInfo{});
  ok->assign(n, false);
  errors->assign(n, Status::Ok());
  std::vector<char> good(n, 0);
  std::atomic<uint64_t> cached{0};
  RETURN_IF_ERROR(detail::ParallelFor(n, threads, o.cancel, "inspect", progress, [&](size_t i) {
    Result<CaseInfo> r =
        detail::NoThrow(plan.cases[i].name, [&] { return InspectCase(plan.cases[i], CaseReadingOf(o)); });
    if (r.ok()) {
      (*infos)[i] = std::move(r).value();
      // Small files read whole are kept for decoding, within a fixed memory budget.
      std::vector<uint8_t>& small = (*infos)[i].small_file;
      if (cached.fetch_add(small.size()) + small.size() > kSmallFileBudget) std::vector<uint8_t>().swap(small);
      good[i] = 1;
    } else {
      (*errors)[i] = r.status();
    }
  }));
  for (size_t i = 0; i < n; ++i) (*ok)[i] = good[i] != 0;
  return Status::Ok();
}

std::string FieldLine(const FieldSpec& f) {
  std::string s = f.name + " " + FieldKindName(f.kind);
  if (f.kind == FieldKind::kNdarray) s += std::string(" ") + DTypeName(f.dtype) + " " + ShapeToString(f.shape);
  if (f.chunked()) s += " chunks " + ShapeToString(f.chunk_shape);
  if (f.filter == Filter::kByteShuffle) s += " shuffled";
  if (f.filter == Filter::kDeltaColumns) s += " delta-coded";
  return s;
}

// With --level auto, label maps and foreground locations of volumes are compressed at this
// level instead of 3: on ITK's brain MRI segmentation 13% smaller (chunked, 74 vs 85 KB),
// its foreground locations 6% smaller, at a few milliseconds per case.
constexpr int kLabelLevel = 9;

WriterOptions MakeWriterOptions(const ConvertOptions& o, const SourcePlan& plan, const detail::Schema& schema,
                                const detail::PreprocessPlan& preprocess, bool auto_level) {
  WriterOptions w;
  w.target_shard_bytes = o.shard_bytes;
  w.codec = o.codec == CodecChoice::kRaw ? Codec::kRaw : Codec::kZstd;
  if (o.level > 0) w.level = o.level;
  w.overwrite = o.overwrite;
  w.companions = {detail::kSkippedFile, detail::kPlansFile, detail::kFingerprintFile};
  w.fsync = o.fsync;
  w.classes = plan.classes;
  w.provenance.converter = "shardify";
  w.provenance.converter_version = SHARDIFY_VERSION;
  w.provenance.source = o.source;
  std::string split;
  for (const auto& [name, f] : o.split) split += (split.empty() ? "" : ",") + name + "=" + std::to_string(f);
  w.provenance.options = {{"layout", LayoutName(plan.layout)},
                          {"level", o.codec == CodecChoice::kRaw ? "none" : std::to_string(o.level)},
                          {"shard_size", std::to_string(o.shard_bytes)},
                          {"dict", o.dict ? "true" : "false"},
                          {"split", split},
                          {"seed", std::to_string(o.seed)},
                          {"on_error", o.skip_errors ? "skip" : "fail"}};
  if (o.codec == CodecChoice::kRaw) w.provenance.options.push_back({"codec", "raw"});  // zstd output stays as it was
  if (!o.group_by.empty()) w.provenance.options.push_back({"group_by", o.group_by});   // only then: output as before
  if (o.labels_from_masks) w.provenance.options.push_back({"labels_from_masks", "true"});
  for (int f : {schema.image, schema.mask}) {  // only when used, so 8-bit output stays as it was
    if (f >= 0 && schema.fields[f].filter == Filter::kByteShuffle) {
      w.provenance.options.push_back({"shuffle", "true"});
      break;
    }
  }
  if (!o.patch_size.empty()) {  // only then, so that unchunked output stays as it was
    w.provenance.options.push_back({"patch_size", ExtentsToString(o.patch_size)});
    w.provenance.options.push_back({"chunk_shape", ShapeToString(schema.fields[schema.image].chunk_shape)});
    if (schema.mask >= 0)
      w.provenance.options.push_back({"mask_chunk_shape", ShapeToString(schema.fields[schema.mask].chunk_shape)});
    if (schema.fg_locations >= 0) w.provenance.options.push_back({"fg_locations", std::to_string(o.fg_locations)});
  }
  for (KeyValue& kv : detail::PreprocessProvenance(preprocess)) w.provenance.options.push_back(std::move(kv));
  if (auto_level && o.codec != CodecChoice::kRaw && o.level < kLabelLevel && schema.mask >= 0) {
    for (int f : {schema.mask, schema.fg_locations}) {
      if (f >= 0) w.field_levels.push_back({schema.fields[f].name, kLabelLevel});
    }
    w.provenance.options.push_back({"mask_level", std::to_string(kLabelLevel)});
  }
  return w;
}

// Writes the skipped inputs into the new dataset as `skipped.tsv` (none: no file).
Status WriteSkipped(DatasetWriter& writer, const std::vector<SkippedInput>& skipped) {
  if (skipped.empty()) return Status::Ok();
  std::string text = "input\treason\n";
  auto clean = [](std::string s) {
    for (char& c : s)
      if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    return s;
  };
  for (const auto& s : skipped) text += clean(s.input) + "\t" + clean(s.reason) + "\n";
  return writer.WriteCompanion(detail::kSkippedFile, text.data(), text.size());
}

struct Prepared {
  SourcePlan plan;
  detail::Schema schema;
  detail::PreprocessPlan preprocess;
  std::vector<size_t> order;
  // The cases the source gives as training cases (split "" or "train" before --split
  // assigns any: nnU-Net's imagesTr), in the source's order, and of those the ones the
  // first pass read (when the plan needs it) with what it found.
  std::vector<size_t> training, first_cases;
  detail::FirstPassResult first;
  detail::Fingerprint fingerprint;                // of the cases the first pass read
  std::vector<std::vector<uint8_t>> small_files;  // per case, see CaseInfo::small_file
  uint64_t max_sample_bytes = 0;                  // largest decoded image + mask
  std::string largest;                            // the case that has it
  CodecChoice codec = CodecChoice::kZstd;         // kZstd or kRaw, `--codec auto` resolved
};

uint64_t CaseBytes(const CaseInfo& c) {
  const Result<uint64_t> image = ByteSize(c.image.shape, c.image.dtype);
  const Result<uint64_t> mask = c.has_mask ? ByteSize(c.mask.shape, c.mask.dtype) : Result<uint64_t>(uint64_t{0});
  if (!image.ok() || !mask.ok() || *image > UINT64_MAX - *mask) return UINT64_MAX;
  return *image + *mask;
}

// `--codec auto`: raw when every readable case together decodes to at most kAutoRawBytes.
CodecChoice ResolveCodec(CodecChoice c, const std::vector<CaseInfo>& infos, const std::vector<bool>& ok) {
  if (c != CodecChoice::kAuto) return c;
  uint64_t total = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!ok[i]) continue;
    const uint64_t bytes = CaseBytes(infos[i]);
    if (bytes > kAutoRawBytes - total) return CodecChoice::kZstd;
    total += bytes;
  }
  return CodecChoice::kRaw;
}

// Cases whose image and mask together decode to more than the per-sample limit become
// per-input errors (each file alone was checked by InspectCase); `extra`, when given, is
// what preprocessing adds per case.
void ApplySampleLimit(const ConvertOptions& o, const SourcePlan& plan, const std::vector<CaseInfo>& infos,
                      std::vector<bool>* ok, std::vector<Status>* errors,
                      const std::vector<uint64_t>* extra = nullptr) {
  for (size_t i = 0; i < infos.size(); ++i) {
    const uint64_t bytes = CaseBytes(infos[i]) + (extra != nullptr ? (*extra)[i] : 0);
    if (!(*ok)[i] || bytes <= o.max_sample_bytes) continue;
    (*ok)[i] = false;
    (*errors)[i] = ResourceExhausted(plan.cases[i].name + ": decodes to " + detail::HumanBytes(bytes) +
                                     ", more than the per-sample memory limit of " +
                                     detail::HumanBytes(o.max_sample_bytes) + " (--max-sample-memory)");
  }
}

// Samples in flight: 16 per thread, fewer when samples are large (at least threads + 1),
// and never more than fit in max_memory.
Result<size_t> WindowFor(const ConvertOptions& o, int threads, uint64_t max_sample_bytes, const std::string& largest) {
  const uint64_t memory = o.max_memory > 0 ? o.max_memory : DefaultMaxMemory();
  const uint64_t decoded = std::max<uint64_t>(1, max_sample_bytes);
  const uint64_t per_sample = decoded > UINT64_MAX / kMemoryPerSampleByte ? UINT64_MAX : decoded * kMemoryPerSampleByte;
  const uint64_t cap = memory / per_sample;
  if (cap == 0) {
    return ResourceExhausted(largest + ": decodes to " + detail::HumanBytes(max_sample_bytes) +
                             "; converting it takes about " + detail::HumanBytes(per_sample) +
                             ", more than the memory limit of " + detail::HumanBytes(memory) + " (--max-memory)");
  }
  if (o.window > 0) return std::min<size_t>(o.window, cap);
  const uint64_t fit = kWindowBudget / std::max<uint64_t>(1, max_sample_bytes);
  const uint64_t t = static_cast<uint64_t>(threads);
  return static_cast<size_t>(std::min(cap, std::max<uint64_t>(t + 1, std::min<uint64_t>(16 * t, fit))));
}

// The first pass over the training cases that inspected cleanly, before anything is
// planned from their shapes: the cropped shapes, the ct statistics, and whether zscore
// channels normalize within the nonzero region (intensity_internal.h). A case it cannot
// read fails with its own error. Every part of a conversion in parts reads them all, so
// parts agree.
Status ReadTrainingCases(const ConvertOptions& o, int threads, ProgressSink* progress, Prepared* p,
                         std::vector<bool>* ok, std::vector<Status>* errors, ConvertSummary* sum) {
  for (size_t i : p->training) {
    if ((*ok)[i]) p->first_cases.push_back(i);
  }
  const detail::FirstPass pass{&p->plan, p->first_cases,     &p->preprocess, !o.dry_run,
                               threads,  o.max_sample_bytes, o.cancel,       progress};
  ASSIGN_OR_RETURN(p->first, detail::RunFirstPass(pass));
  const detail::FirstPassResult& first = p->first;
  for (size_t k = 0; k < p->first_cases.size(); ++k) {
    if (!first.errors[k].ok()) (*ok)[p->first_cases[k]] = false, (*errors)[p->first_cases[k]] = first.errors[k];
  }
  if (p->preprocess.needs_ct_statistics() && !first.intensities.empty()) {  // measured; given ones stay
    p->preprocess.ct.clear();
    for (const detail::IntensityProperties& c : first.intensities) p->preprocess.ct.push_back(c.norm());
    p->preprocess.ct_cases = first.intensity_cases;
    p->preprocess.ct_draws = first.draws;
    for (size_t c = 0; c < p->preprocess.ct.size(); ++c) {
      const ChannelNorm& n = p->preprocess.ct[c];
      char line[256];
      std::snprintf(line, sizeof line,
                    "ct statistics of channel %zu over %zu training case(s): clip [%g, %g], mean %g, std %g", c,
                    first.intensity_cases, n.clip_low, n.clip_high, n.mean, n.stddev);
      sum->preprocessing.push_back(line);
    }
  }
  if (detail::NeedsRegionRule(p->preprocess)) {
    const bool in_region = first.median_kept < detail::kRegionNormBelow;
    p->preprocess.zscore_in_region = {in_region};
    char line[320];
    std::snprintf(line, sizeof line,
                  "zscore %s: cropping keeps a median %.1f%% of the voxels of %zu training case(s), %s 75%% "
                  "(nnU-Net's use_mask_for_norm)",
                  in_region ? "within the nonzero region (holes filled, labelled voxels included), 0 outside"
                            : "over every voxel",
                  100 * first.median_kept, first.crop_cases, in_region ? "below" : "not below");
    sum->preprocessing.push_back(line);
  }
  return Status::Ok();
}

// Plans the preprocessing: its options, the first pass where they need it, and the grids.
Status PlanCases(const ConvertOptions& o, int threads, ProgressSink* progress, Prepared* p,
                 std::vector<CaseInfo>* infos, std::vector<bool>* ok, std::vector<Status>* errors,
                 std::vector<uint64_t>* work_bytes, ConvertSummary* sum) {
  const SourcePlan& plan = p->plan;
  RETURN_IF_ERROR(
      detail::PlanPreprocessing(o.preprocess, plan, *infos, *ok, *errors, &p->preprocess, &sum->preprocessing));
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    if (plan.cases[i].split.empty() || plan.cases[i].split == "train") p->training.push_back(i);
  }
  if (detail::NeedsFirstPass(p->preprocess))
    RETURN_IF_ERROR(ReadTrainingCases(o, threads, progress, p, ok, errors, sum));
  if (IsCancelled(o)) return Cancelled("conversion cancelled");
  detail::Fingerprint& f = p->fingerprint;
  for (size_t k = 0; k < p->first_cases.size(); ++k) {
    const size_t i = p->first_cases[k];
    if (p->first.cropped[k].empty()) continue;
    const std::vector<double>& s = (*infos)[i].image.geometry.spacing;  // before PlanGrids: the source's
    f.cases.spacings.push_back(std::vector<double>(s.rbegin(), s.rend()));
    f.cases.cropped.push_back(p->first.cropped[k]);
  }
  for (size_t i : p->training) {
    if (!(*errors)[i].ok() && f.cases.why_none.ok()) f.cases.why_none = (*errors)[i];
  }
  f.intensities = p->first.intensities;
  f.median_relative_size_after_cropping = p->first.median_kept;
  return detail::PlanGrids(plan, f.cases, *infos, *ok, *errors, &p->preprocess, work_bytes, &sum->preprocessing);
}

Status Prepare(const ConvertOptions& o, int threads, ProgressSink* progress, Prepared* p, ConvertSummary* sum) {
  ASSIGN_OR_RETURN(p->plan, PlanSource(o.source, o.layout, o.class_names, o.dest));
  SourcePlan& plan = p->plan;
  sum->layout = LayoutName(plan.layout);
  sum->classes = plan.classes;
  sum->warnings = plan.warnings;
  sum->ignored_files = plan.ignored_files;
  for (const auto& b : plan.bad) RETURN_IF_ERROR(Fail(o, sum, b.path, InvalidArgument(b.path + ": " + b.reason)));
  std::vector<CaseInfo> infos;
  std::vector<bool> ok;
  std::vector<Status> errors;
  RETURN_IF_ERROR(InspectAll(plan, o, threads, progress, &infos, &ok, &errors));
  if (IsCancelled(o)) return Cancelled("conversion cancelled");
  // Masks are read for the label check unless an input's own error fails the run anyway.
  if (o.skip_errors || std::all_of(errors.begin(), errors.end(), [](const Status& e) { return e.ok(); })) {
    const detail::LabelCheck labels{threads,  o.max_sample_bytes,  o.cancel,
                                    progress, o.labels_from_masks, o.preprocess.interprets()};
    RETURN_IF_ERROR(detail::CheckMaskLabels(&plan, ok, labels, &sum->warnings));
  }
  ApplySampleLimit(o, plan, infos, &ok, &errors);
  std::vector<uint64_t> work_bytes;  // preprocessing's own memory per case
  RETURN_IF_ERROR(PlanCases(o, threads, progress, p, &infos, &ok, &errors, &work_bytes, sum));
  if (o.preprocess.transforms()) ApplySampleLimit(o, plan, infos, &ok, &errors, &work_bytes);  // resampled sizes
  p->schema = detail::BuildSchema(plan, infos, ok, errors);
  p->codec = ResolveCodec(o.codec, infos, ok);
  if (!p->schema.fields.empty()) {
    detail::Schema& s = p->schema;
    RETURN_IF_ERROR(detail::FinishSchema(infos, ok, plan.has_mask, s.geometry_dims, s.image, s.mask, s.fields,
                                         &s.record, &p->preprocess, &sum->preprocessing));
    RETURN_IF_ERROR(
        detail::ApplyPatchSize(p->schema, infos, ok, o.patch_size, o.fg_locations, o.seed).WithContext(o.source));
    const bool filters = o.shuffle && p->codec == CodecChoice::kZstd;  // they help compression only
    for (int f : {p->schema.image, p->schema.mask}) {
      if (filters && f >= 0 && DTypeSize(p->schema.fields[f].dtype) > 1)
        p->schema.fields[f].filter = Filter::kByteShuffle;
    }
    // Sorted coordinates: their differences compress to about half (format version 4).
    if (filters && s.fg_locations >= 0) s.fields[s.fg_locations].filter = Filter::kDeltaColumns;
  }
  p->small_files.resize(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    p->small_files[i] = std::move(infos[i].small_file);
    const uint64_t bytes = CaseBytes(infos[i]) + work_bytes[i];
    if (!ok[i] || bytes <= p->max_sample_bytes) continue;
    p->max_sample_bytes = bytes;
    p->largest = plan.cases[i].name;
  }
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    if (!errors[i].ok()) RETURN_IF_ERROR(Fail(o, sum, plan.cases[i].name, errors[i]));
  }
  if (p->schema.fields.empty()) return InvalidArgument(o.source + ": no readable inputs");
  std::vector<std::string> split_order, groups;
  if (!o.group_by.empty()) {
    ASSIGN_OR_RETURN(groups, detail::GroupKeys(plan, ok, o.group_by));
    std::set<std::string> distinct;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (ok[i]) distinct.insert(groups[i]);
    }
    sum->groups = distinct.size();
  }
  p->order = detail::AssignSplits(plan.cases, ok, o.split, o.seed, &split_order, groups);
  for (const auto& f : p->schema.fields) sum->fields.push_back(FieldLine(f));
  return Status::Ok();
}

// nnU-Net's fingerprint and plans of this conversion, into the new dataset.
Status WritePlans(DatasetWriter& writer, const ConvertOptions& o, const Prepared& p, ConvertSummary* sum) {
  detail::PlansInput in;
  in.dataset_name = fs::path(o.source).filename().string();
  if (in.dataset_name.empty()) in.dataset_name = fs::path(o.source).parent_path().filename().string();
  in.plan = &p.preprocess;
  in.fingerprint = &p.fingerprint;
  if (o.patch_size.size() == 3) in.patch_size = o.patch_size;
  ASSIGN_OR_RETURN(const detail::NnunetFiles files, detail::NnunetPlans(in));
  RETURN_IF_ERROR(writer.WriteCompanion(detail::kPlansFile, files.plans.data(), files.plans.size()));
  RETURN_IF_ERROR(writer.WriteCompanion(detail::kFingerprintFile, files.fingerprint.data(), files.fingerprint.size()));
  sum->preprocessing.push_back(std::string("nnU-Net's plans and fingerprint: ") + detail::kPlansFile + ", " +
                               detail::kFingerprintFile + " in the dataset (reconvert with --plans " +
                               detail::kPlansFile + ")");
  return Status::Ok();
}

void CountSplits(const Prepared& p, const std::vector<size_t>& written, ConvertSummary* sum) {
  sum->splits.clear();
  for (size_t i : written) {
    const std::string& name = p.plan.cases[i].split;
    if (sum->splits.empty() || sum->splits.back().name != name) sum->splits.push_back({name, 0});
    ++sum->splits.back().samples;
  }
  sum->samples = written.size();
}

// Small samples gain from a higher level and a dictionary (kSmallSampleBytes,
// kDictionaryMinSamples: format/writer.h). Measured on Fashion-MNIST PNGs: level 3 stores
// 1.044x the PNG bytes, level 9 + dictionary 0.989x, at the same conversion speed.

ConvertOptions ResolveAuto(ConvertOptions o, const Prepared& p) {
  o.codec = p.codec;
  if (o.codec == CodecChoice::kRaw) {  // no compression: no level, no dictionary
    o.dict = 0;
    o.level = 0;
    return o;
  }
  const bool small = p.max_sample_bytes <= kSmallSampleBytes;
  const size_t samples = p.order.size();
  if (o.level == 0) o.level = small ? 9 : 3;
  if (o.dict < 0) o.dict = small && samples >= kDictionaryMinSamples ? 1 : 0;
  return o;
}

}  // namespace

const char* CodecChoiceName(CodecChoice c) {
  switch (c) {
    case CodecChoice::kZstd:
      return "zstd";
    case CodecChoice::kRaw:
      return "raw";
    case CodecChoice::kAuto:
      return "auto";
  }
  return "?";
}

uint64_t DefaultMaxMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const uint64_t physical = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  return std::max<uint64_t>(physical / 2, 1ull << 30);
}

namespace {

Result<ConvertSummary> ConvertImpl(const ConvertOptions& given, ProgressSink* progress) {
  const auto start = Clock::now();
  ConvertOptions options = given;  // a plans file stands for the options it sets
  if (!options.preprocess.plans_file.empty()) RETURN_IF_ERROR(ApplyPlans(&options));
  int threads = options.threads > 0 ? options.threads : static_cast<int>(CoreCount());
  ConvertSummary sum;
  sum.dry_run = options.dry_run;
  Prepared p;
  RETURN_IF_ERROR(Prepare(options, threads, progress, &p, &sum));
  const ConvertOptions o = ResolveAuto(options, p);
  sum.codec = CodecChoiceName(o.codec);
  ASSIGN_OR_RETURN(const size_t window, WindowFor(o, threads, p.max_sample_bytes, p.largest));
  WriterOptions wo = MakeWriterOptions(o, p.plan, p.schema, p.preprocess, options.level == 0);
  std::vector<size_t> order = p.order;  // what this run writes: every sample, or one part's slice
  std::string dest = o.dest;
  if (o.parts > 0) {
    ASSIGN_OR_RETURN(dest, detail::StartPart(o, p.plan, p.schema.fields, order.size(), &wo, &sum));
    order.assign(p.order.begin() + wo.part.first_sample, p.order.begin() + wo.part.first_sample + wo.part.samples);
    std::vector<char> mine(p.small_files.size(), 0);  // small files read by inspection: this part's only
    for (size_t i : order) mine[i] = 1;
    for (size_t i = 0; i < mine.size(); ++i)
      if (!mine[i]) std::vector<uint8_t>().swap(p.small_files[i]);
  }
  if (o.dry_run || sum.part_state != ConvertSummary::PartState::kConverted) {  // complete parts: described already
    if (sum.part_state == ConvertSummary::PartState::kConverted) CountSplits(p, order, &sum);
    sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return sum;
  }
  ASSIGN_OR_RETURN(auto writer, DatasetWriter::Create(dest, p.schema.fields, wo));
  // Dictionaries learn from the whole order, so that every part trains the same one.
  detail::EncodeJob job{&p.plan,  &p.schema, &p.order,       writer.get(),       threads,      window,
                        o.cancel, progress,  &p.small_files, o.max_sample_bytes, &p.preprocess};
  if (o.dict) RETURN_IF_ERROR(detail::TrainDictionaries(job, p.max_sample_bytes, &sum));
  job.order = &order;
  std::vector<size_t> written;
  ASSIGN_OR_RETURN(std::vector<detail::CaseFailure> failures,
                   detail::EncodeAll(job, o.skip_errors, &written, &sum.bytes_in));
  for (const auto& f : failures) sum.skipped.push_back({f.input, f.status.ToString()});
  if (written.empty() && o.parts == 0) return InvalidArgument(o.source + ": every input failed; nothing to write");
  RETURN_IF_ERROR(WriteSkipped(*writer, sum.skipped));
  if (detail::WritesPlans(p.preprocess)) RETURN_IF_ERROR(WritePlans(*writer, o, p, &sum));
  RETURN_IF_ERROR(writer->Finish());
  for (const std::string& path : p.plan.shared_files) sum.bytes_in += detail::PathBytes(path);
  CountSplits(p, written, &sum);
  sum.shards = writer->manifest().shards.size();
  for (const auto& s : writer->manifest().shards) sum.bytes_out += s.size_bytes;
  sum.bytes_out += detail::PathBytes(JoinPath(dest, o.parts > 0 ? kPartManifestFileName : kManifestFileName));
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return sum;
}

}  // namespace

Result<ConvertSummary> Convert(const ConvertOptions& options, ProgressSink* progress) {
  if (storage::IsRemote(options.dest)) return detail::ConvertToObjectStore(options, progress);
  // Threads catch their own allocation failures; this covers the calling thread's work.
  return detail::NoThrow(options.source, [&] { return ConvertImpl(options, progress); });
}

}  // namespace shardify::convert
