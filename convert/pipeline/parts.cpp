// Conversion in parts (see parts.h and parts_internal.h).
#include "convert/pipeline/parts.h"

#include <algorithm>
#include <sstream>

#include "base/checksum.h"
#include "base/file.h"
#include "convert/pipeline/parts_internal.h"
#include "convert/pipeline/upload_internal.h"
#include "convert/preprocess/plans_internal.h"
#include "convert/sources/source_internal.h"
#include "format/fields.h"
#include "format/layout.h"
#include "storage/location.h"

namespace shardify::convert {
namespace {

using Pair = std::pair<uint32_t, uint32_t>;

// A 0-based rank of `size` ranks, as environment variables `rank_name` and `size_name`.
Result<Pair> FromRank(const std::string& rank_name, const std::string& rank, const std::string& size_name,
                      const std::string& size) {
  int64_t r = 0, n = 0;
  if (!detail::ParseInt(rank, &r) || !detail::ParseInt(size, &n) || n < 1 || n > kMaxParts || r < 0 || r >= n) {
    return InvalidArgument("--part auto: " + rank_name + "=" + rank + " and " + size_name + "=" + size +
                           " are not a rank 0..N-1 of N <= " + std::to_string(kMaxParts) + " ranks");
  }
  return Pair{static_cast<uint32_t>(r + 1), static_cast<uint32_t>(n)};
}

Result<Pair> FromEnvironment(const EnvLookup& env) {
  auto get = [&](const char* name) -> std::string {
    const char* v = env ? env(name) : nullptr;
    return v != nullptr ? v : "";
  };
  if (!get("RANK").empty() && !get("WORLD_SIZE").empty())
    return FromRank("RANK", get("RANK"), "WORLD_SIZE", get("WORLD_SIZE"));
  const std::string id = get("SLURM_ARRAY_TASK_ID"), count = get("SLURM_ARRAY_TASK_COUNT");
  if (!id.empty() && !count.empty()) {
    const std::string min = get("SLURM_ARRAY_TASK_MIN"), max = get("SLURM_ARRAY_TASK_MAX");
    int64_t i = 0, lo = 0, hi = 0, n = 0;
    if (!detail::ParseInt(id, &i) || !detail::ParseInt(min, &lo) || !detail::ParseInt(max, &hi) ||
        !detail::ParseInt(count, &n) || hi - lo + 1 != n) {
      return InvalidArgument("--part auto: the Slurm array (ids " + min + ".." + max + ", " + count +
                             " tasks) is not a run of consecutive ids; pass --part K/N");
    }
    return FromRank("SLURM_ARRAY_TASK_ID-SLURM_ARRAY_TASK_MIN", std::to_string(i - lo), "SLURM_ARRAY_TASK_COUNT",
                    count);
  }
  if (!get("SLURM_PROCID").empty() && !get("SLURM_NTASKS").empty())
    return FromRank("SLURM_PROCID", get("SLURM_PROCID"), "SLURM_NTASKS", get("SLURM_NTASKS"));
  return InvalidArgument(
      "--part auto: the environment names no rank (RANK and WORLD_SIZE, SLURM_ARRAY_TASK_ID and "
      "SLURM_ARRAY_TASK_COUNT, or SLURM_PROCID and SLURM_NTASKS); pass --part K/N");
}

// Provenance keys that pin the input list: its size and a digest of every case's name,
// label, split and files, so that parts of a source that changed in between do not merge.
void AddInputKeys(const SourcePlan& plan, Provenance* p) {
  Checksum64Stream h;
  for (const CaseInput& c : plan.cases) {
    std::string line = c.name + '\t' + std::to_string(c.label) + '\t' + c.split + '\t' + c.mask;
    for (const std::string& image : c.images) line += '\t' + image;
    line += '\n';
    h.Update(line.data(), line.size());
  }
  p->options.push_back({"inputs", std::to_string(plan.cases.size())});
  p->options.push_back({"inputs_xxh3", Hex64(h.Digest())});
}

Result<Manifest> ReadManifestAt(const std::string& path, ManifestKind kind) {
  ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return DecodeManifestFile(file->data(), file->size(), path, kind);
}

bool MergedFrom(const Manifest& m, uint32_t parts) {
  return MetaValue(m.provenance.options, kPartsKey) == std::to_string(parts);
}

// The summary of a run that found its part written already: what `m` holds.
void Describe(const Manifest& m, ConvertSummary* sum) {
  sum->samples = m.num_samples;
  sum->splits.clear();
  for (const SplitInfo& s : m.splits) sum->splits.push_back({s.name, s.num_samples});
  sum->shards = m.shards.size();
  for (const ShardInfo& s : m.shards) sum->bytes_out += s.size_bytes;
  for (const FieldSpec& f : m.fields) sum->dictionary = sum->dictionary || !f.dictionary.empty();
}

}  // namespace

Result<Pair> ParsePart(const std::string& text, const EnvLookup& env) {
  if (text == "auto") return FromEnvironment(env);
  const size_t slash = text.find('/');
  int64_t k = 0, n = 0;
  if (slash == std::string::npos || !detail::ParseInt(text.substr(0, slash), &k) ||
      !detail::ParseInt(text.substr(slash + 1), &n) || n < 1 || n > kMaxParts || k < 1 || k > n) {
    return InvalidArgument("--part must be K/N with 1 <= K <= N <= " + std::to_string(kMaxParts) + ", or auto; got '" +
                           text + "'");
  }
  return Pair{static_cast<uint32_t>(k), static_cast<uint32_t>(n)};
}

Result<MergeSummary> Merge(const std::string& dest, bool fsync) {
  if (storage::IsRemote(dest)) return detail::MergeInObjectStore(dest, fsync);
  MergeOptions m;
  m.fsync = fsync;
  m.tables = {detail::kSkippedFile};
  m.copies = {detail::kPlansFile, detail::kFingerprintFile};
  return MergeParts(dest, m);
}

std::string FormatMergeSummary(const std::string& dest, const MergeSummary& s) {
  std::ostringstream o;
  o << (s.already_merged ? "already merged: " : "merged: ") << dest << " holds " << s.samples << " samples from "
    << s.parts << " part" << (s.parts == 1 ? "" : "s") << " in " << s.shards << " shard" << (s.shards == 1 ? "" : "s")
    << "\n  splits:";
  for (const SplitInfo& sp : s.splits) o << " " << sp.name << "=" << sp.num_samples;
  o << "\n";
  if (s.shards_rewritten > 0) {
    o << "  " << s.shards_rewritten << " shard(s), " << detail::HumanBytes(s.bytes_rewritten)
      << ", copied with new sample numbers (inputs skipped in an earlier part)\n";
  }
  if (s.table_rows > 0) o << "  skipped " << s.table_rows << " input(s), listed in " << detail::kSkippedFile << "\n";
  return o.str();
}

namespace detail {

Result<std::string> StartPart(const ConvertOptions& o, const SourcePlan& plan, const std::vector<FieldSpec>& fields,
                              uint64_t samples, WriterOptions* w, ConvertSummary* sum) {
  PartInfo& part = w->part;
  part.index = o.part;
  part.count = o.parts;
  const uint64_t n = std::max<uint32_t>(1, o.parts), k = o.part - 1, base = samples / n, rem = samples % n;
  part.first_sample = k * base + std::min(k, rem);
  part.samples = base + (k < rem ? 1 : 0);
  RETURN_IF_ERROR(ValidatePart(part));
  AddInputKeys(plan, &w->provenance);
  w->overwrite = false;  // a part directory never holds a dataset; a complete part is handled here
  sum->part = part;
  sum->part_of = samples;
  if (part.index != 1) sum->skipped.clear();
  const std::string dir = PartDir(o.dest, part);
  Manifest want;
  want.fields = fields;
  want.classes = w->classes;
  want.provenance = w->provenance;
  const std::string merged = JoinPath(o.dest, kManifestFileName);
  if (PathExists(merged)) {
    ASSIGN_OR_RETURN(const Manifest m, ReadManifestAt(merged, ManifestKind::kDataset));
    want.format_version = m.format_version;
    const std::string d = MergedFrom(m, o.parts) ? ConversionDifference(m, want, false)
                                                 : "not merged from " + std::to_string(o.parts) + " parts";
    if (!d.empty() || o.overwrite) {
      return AlreadyExists(o.dest + ": already holds a dataset" + (d.empty() ? "" : " (" + d + ")") +
                           "; parts are never written over one: remove it first");
    }
    sum->part_state = ConvertSummary::PartState::kMerged;
    Describe(m, sum);
    return dir;
  }
  if (o.overwrite || !PathExists(JoinPath(dir, kPartManifestFileName))) return dir;
  Result<Manifest> existing = ReadPartManifest(dir);
  if (!existing.ok())
    return existing.status().WithContext("to convert part " + PartName(part) + " again, pass " + kOverwriteHint);
  want.format_version = existing->format_version;
  std::string d = ConversionDifference(*existing, want, false);
  Result<PartInfo> was = PartOf(*existing, dir);
  if (d.empty() && (!was.ok() || !(*was == part))) d = "another slice of the input";
  if (!d.empty()) {
    return AlreadyExists(dir + ": holds part " + PartName(part) + " of another conversion (" + d +
                         "); to convert it again, pass " + kOverwriteHint);
  }
  sum->part_state = ConvertSummary::PartState::kComplete;
  Describe(*existing, sum);
  return dir;
}

}  // namespace detail
}  // namespace shardify::convert
