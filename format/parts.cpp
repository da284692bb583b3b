// Datasets written in parts: naming, part manifests and the merge (see parts.h and
// FORMAT.md section 6).
#include "format/parts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "base/checksum.h"
#include "base/file.h"
#include "format/destination_internal.h"
#include "format/layout.h"
#include "format/moments.h"
#include "format/shard_index_internal.h"
#include "format/writer.h"

namespace shardify {
namespace {

constexpr char kPartKey[] = "part";
constexpr char kFirstKey[] = "part_first_sample";
constexpr char kSamplesKey[] = "part_samples";
constexpr uint64_t kMaxTableBytes = 1ull << 30;  // a companion table is read whole
constexpr uint64_t kCopyPiece = 4ull << 20;      // bytes per write when a shard is copied

// Keys that differ between the parts of one conversion and its merged dataset.
bool IsPartKey(const std::string& key) {
  return key == kPartKey || key == kFirstKey || key == kSamplesKey || key == kPartsKey;
}

const std::string* FindOption(const Provenance& p, const std::string& key) {
  for (const KeyValue& kv : p.options)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

// Decimal digits only, no overflow.
bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

std::string DirName(uint32_t index, uint32_t count) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%05u-of-%05u", index, count);
  return buf;
}

// "00002-of-00004" (exactly as DirName writes it) -> index 2, count 4.
bool ParseDirName(const std::string& name, PartInfo* part) {
  uint64_t k = 0, n = 0;
  if (name.size() != 14 || name.compare(5, 4, "-of-") != 0 || !ParseU64(name.substr(0, 5), &k) ||
      !ParseU64(name.substr(9), &n))
    return false;
  part->index = static_cast<uint32_t>(k);
  part->count = static_cast<uint32_t>(n);
  return ValidatePart(*part).ok();
}

}  // namespace

bool PartInfo::operator==(const PartInfo& o) const {
  return index == o.index && count == o.count && first_sample == o.first_sample && samples == o.samples;
}

std::string PartName(const PartInfo& part) { return std::to_string(part.index) + "/" + std::to_string(part.count); }

std::string PartDir(const std::string& dataset_dir, const PartInfo& part) {
  return JoinPath(JoinPath(dataset_dir, kPartsDirName), DirName(part.index, part.count));
}

Status ValidatePart(const PartInfo& part) {
  if (part.count < 1 || part.count > kMaxParts)
    return InvalidArgument("part count " + std::to_string(part.count) + " is outside 1.." + std::to_string(kMaxParts));
  if (part.index < 1 || part.index > part.count)
    return InvalidArgument("part " + PartName(part) + ": the part number must be 1.." + std::to_string(part.count));
  if (part.samples > UINT64_MAX - part.first_sample)
    return InvalidArgument("part " + PartName(part) + ": its samples run past the largest sample number");
  return Status::Ok();
}

void AddPartKeys(const PartInfo& part, Provenance* provenance) {
  provenance->options.push_back({kPartKey, PartName(part)});
  provenance->options.push_back({kFirstKey, std::to_string(part.first_sample)});
  provenance->options.push_back({kSamplesKey, std::to_string(part.samples)});
}

Result<PartInfo> PartOf(const Manifest& m, const std::string& where) {
  const std::string* name = FindOption(m.provenance, kPartKey);
  const std::string* first = FindOption(m.provenance, kFirstKey);
  const std::string* samples = FindOption(m.provenance, kSamplesKey);
  if (name == nullptr || first == nullptr || samples == nullptr)
    return InvalidArgument(where + ": not a part manifest (no provenance keys part, part_first_sample, part_samples)");
  PartInfo p;
  const size_t slash = name->find('/');
  uint64_t k = 0, n = 0;
  if (slash == std::string::npos || !ParseU64(name->substr(0, slash), &k) || !ParseU64(name->substr(slash + 1), &n) ||
      k > kMaxParts || n > kMaxParts || !ParseU64(*first, &p.first_sample) || !ParseU64(*samples, &p.samples))
    return InvalidArgument(where + ": bad part keys (part '" + *name + "', first sample '" + *first + "', samples '" +
                           *samples + "')");
  p.index = static_cast<uint32_t>(k);
  p.count = static_cast<uint32_t>(n);
  RETURN_IF_ERROR(ValidatePart(p).WithContext(where));
  return p;
}

Result<Manifest> ReadPartManifest(const std::string& part_dir) {
  const std::string path = JoinPath(part_dir, kPartManifestFileName);
  if (!PathExists(path)) return NotFound(part_dir + ": no " + kPartManifestFileName + " (the part is not complete)");
  ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(Manifest m, DecodeManifestFile(file->data(), file->size(), path, ManifestKind::kPart));
  Result<PartInfo> part = PartOf(m, path);
  if (!part.ok()) return Corruption(part.status().message());
  const uint64_t first =
      m.shards.empty() ? (m.splits.empty() ? part->first_sample : m.splits[0].first_sample) : m.shards[0].first_sample;
  if (first != part->first_sample || m.num_samples > part->samples)
    return Corruption(path + ": samples [" + std::to_string(first) + ", +" + std::to_string(m.num_samples) +
                      ") lie outside the part's planned [" + std::to_string(part->first_sample) + ", +" +
                      std::to_string(part->samples) + ")");
  return m;
}

namespace {

// A part found under DIR/parts, locked while the merge runs.
struct Part {
  PartInfo info;
  std::string dir;
  Manifest manifest;
  std::unique_ptr<FileLock> lock;
  uint64_t shift = 0;  // planned first sample - actual first sample (inputs skipped before it)
};

std::string Describe(const PartInfo& p, const std::string& dir) { return "part " + PartName(p) + " (" + dir + ")"; }

Result<std::unique_ptr<FileLock>> Lock(const std::string& dir, const std::string& what) {
  Result<std::unique_ptr<FileLock>> lock = FileLock::Acquire(JoinPath(dir, detail::kLockFileName));
  if (!lock.ok() && lock.status().code() == StatusCode::kBusy)
    return Busy(what + " is being written (" + lock.status().message() + "); wait for it to end");
  return lock;
}

// A merge moves and removes the files of each part: through a symbolic link, those of the
// folder it names. So parts are merged only from directories of their own.
Status RefuseLink(const std::string& path) {
  return InvalidArgument(path +
                         " is a symbolic link; parts are merged only from directories of their own (the "
                         "merge moves and removes their files)");
}

// The part directories under `root` by number, and their count; refuses foreign entries,
// symbolic links and mixed counts.
Result<std::map<uint32_t, std::string>> ListParts(const std::string& root, uint32_t* count_out = nullptr) {
  if (IsSymlink(root)) return RefuseLink(root);
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(root));
  std::map<uint32_t, std::string> out;
  uint32_t count = 0;
  std::string first;
  for (const std::string& name : names) {
    if (name[0] == '.') continue;  // hidden: not written by a part
    if (IsSymlink(JoinPath(root, name))) return RefuseLink(JoinPath(root, name));
    PartInfo p;
    if (!ParseDirName(name, &p))
      return InvalidArgument(root + ": '" + name + "' is not a part directory (named like 00001-of-00004)");
    if (count != 0 && p.count != count)
      return InvalidArgument(root + ": parts of different conversions: " + first + " is one of " +
                             std::to_string(count) + " parts, " + name + " one of " + std::to_string(p.count));
    if (count == 0) first = name, count = p.count;
    out[p.index] = JoinPath(root, name);
  }
  if (count_out != nullptr) *count_out = count;
  return out;
}

// Lists, locks and reads every part; refuses missing, incomplete and duplicate parts.
Result<std::vector<Part>> LoadParts(const std::string& dir) {
  const std::string root = JoinPath(dir, kPartsDirName);
  if (!IsDirectory(root))
    return NotFound(dir + ": no parts to merge (no " + root + "); convert them first with --part K/N");
  PartInfo want;
  ASSIGN_OR_RETURN(const auto found, ListParts(root, &want.count));
  if (found.empty()) return NotFound(root + ": no parts to merge");
  std::vector<Part> parts;
  for (uint32_t k = 1; k <= want.count; ++k) {
    want.index = k;
    const std::string where = Describe(want, PartDir(dir, want));
    if (found.count(k) == 0) return NotFound(where + " is missing; convert it with --part " + PartName(want));
    Part p;
    p.dir = PartDir(dir, want);
    ASSIGN_OR_RETURN(p.lock, Lock(p.dir, where));
    Result<Manifest> m = ReadPartManifest(p.dir);
    if (!m.ok() && m.status().code() == StatusCode::kNotFound)
      return NotFound(where + " is not complete (no " + kPartManifestFileName +
                      ": it failed or was interrupted); convert it again with --part " + PartName(want));
    if (!m.ok()) return m.status().WithContext(where);
    p.manifest = std::move(m).value();
    ASSIGN_OR_RETURN(p.info, PartOf(p.manifest, where));
    if (p.info.index != k || p.info.count != want.count)
      return InvalidArgument(where + " holds part " + PartName(p.info) +
                             ": a duplicate or a copy; remove it and convert part " + PartName(want) + " again");
    parts.push_back(std::move(p));
  }
  return parts;
}

// What differs between two fields, or "" when they are equal.
std::string FieldDifference(const FieldSpec& a, const FieldSpec& b, bool dictionaries) {
  if (a.name != b.name) return "field '" + b.name + "' where the first has '" + a.name + "'";
  const std::string f = "field '" + a.name + "': ";
  if (a.kind != b.kind || a.dtype != b.dtype) return f + "kind or dtype";
  if (a.shape != b.shape) return f + "shape " + ShapeToString(b.shape) + ", the first has " + ShapeToString(a.shape);
  if (dictionaries && a.dictionary != b.dictionary) return f + "dictionary";
  if (a.chunk_shape != b.chunk_shape || a.filter != b.filter) return f + "chunk shape or filter";
  if (!(a.meta == b.meta)) return f + "meta";
  return "";
}

std::vector<KeyValue> WithoutPartKeys(const std::vector<KeyValue>& options) {
  std::vector<KeyValue> out;
  for (const KeyValue& kv : options)
    if (!IsPartKey(kv.key)) out.push_back(kv);
  return out;
}

// The options a conversion was asked for: without the part keys, and without
// kRawLiteralsKey, which the writer adds once it has trained the dictionaries (a run's plan
// has none yet; the dictionaries themselves are compared with the fields).
std::vector<KeyValue> AskedOptions(const std::vector<KeyValue>& options) {
  std::vector<KeyValue> out;
  for (const KeyValue& kv : WithoutPartKeys(options))
    if (kv.key != kRawLiteralsKey) out.push_back(kv);
  return out;
}

std::string OptionDifference(const std::vector<KeyValue>& a, const std::vector<KeyValue>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size() && i < b.size() && a[i] == b[i]) continue;
    if (i >= b.size()) return "option '" + a[i].key + "' is missing";
    if (i >= a.size()) return "option '" + b[i].key + "' is not in the first";
    if (a[i].key != b[i].key) return "option '" + b[i].key + "' where the first has '" + a[i].key + "'";
    return "option '" + b[i].key + "' is '" + b[i].value + "', the first has '" + a[i].value + "'";
  }
  return "";
}

}  // namespace

std::string ConversionDifference(const Manifest& a, const Manifest& b, bool dictionaries) {
  if (a.format_version != b.format_version)
    return "format version " + std::to_string(b.format_version) + ", the first has " + std::to_string(a.format_version);
  if (a.fields.size() != b.fields.size()) return "a different number of fields (schema)";
  for (size_t i = 0; i < a.fields.size(); ++i) {
    const std::string d = FieldDifference(a.fields[i], b.fields[i], dictionaries);
    if (!d.empty()) return d;
  }
  if (a.classes != b.classes) return "class names";
  const Provenance &p = a.provenance, &q = b.provenance;
  if (p.converter != q.converter || p.converter_version != q.converter_version)
    return "converter " + q.converter + " " + q.converter_version + ", the first has " + p.converter + " " +
           p.converter_version;
  if (p.source != q.source) return "source '" + q.source + "', the first has '" + p.source + "'";
  return OptionDifference(AskedOptions(p.options), AskedOptions(q.options));
}

namespace {

// Parts agree and follow each other; sets each part's shift.
Status CheckParts(std::vector<Part>& parts) {
  uint64_t planned = 0, actual = 0;
  for (Part& p : parts) {
    const std::string where = Describe(p.info, p.dir);
    const std::string d = ConversionDifference(parts[0].manifest, p.manifest);
    if (!d.empty())
      return InvalidArgument(where + " does not match part 1: " + d +
                             "; parts of different conversions cannot be merged (convert it again like the others)");
    if (p.info.first_sample != planned)
      return InvalidArgument(where + " starts at sample " + std::to_string(p.info.first_sample) +
                             ", but the parts before it end at " + std::to_string(planned));
    p.shift = planned - actual;
    planned += p.info.samples;
    actual += p.manifest.num_samples;
  }
  if (actual == 0) return InvalidArgument("no part holds a sample (every input failed); nothing to merge");
  return Status::Ok();
}

// The shard at `path` is the one `s` describes: size, both ends, index checksum.
Status CheckShardFile(const std::string& path, const ShardInfo& s, std::unique_ptr<MappedFile>* mapped) {
  ASSIGN_OR_RETURN(const uint64_t size, FileSize(path));
  if (size != s.size_bytes)
    return Corruption(path + ": " + std::to_string(size) + " bytes, its part manifest says " +
                      std::to_string(s.size_bytes));
  ASSIGN_OR_RETURN(*mapped, MappedFile::Open(path));
  const uint8_t* d = (*mapped)->data();
  RETURN_IF_ERROR(CheckShardEnds(d, d + size - kShardFooterSize, size, path));
  const ShardFooter f = DecodeShardFooter(d + size - kShardFooterSize);
  if (f.index_checksum != s.index_checksum)
    return Corruption(path + ": index checksum " + Hex64(f.index_checksum) + ", its part manifest says " +
                      Hex64(s.index_checksum));
  return Status::Ok();
}

Status WriteShardCopy(const std::string& tmp, const uint8_t* data, uint64_t blob_end, const std::vector<uint8_t>& index,
                      const uint8_t footer[kShardFooterSize], bool fsync) {
  ASSIGN_OR_RETURN(auto out, WritableFile::Create(tmp));
  for (uint64_t off = 0; off < blob_end; off += kCopyPiece)
    RETURN_IF_ERROR(out->Append(data + off, static_cast<size_t>(std::min(kCopyPiece, blob_end - off))));
  RETURN_IF_ERROR(out->Append(index.data(), index.size()));
  RETURN_IF_ERROR(out->Append(footer, kShardFooterSize));
  if (fsync) RETURN_IF_ERROR(out->Sync());
  return out->Close();
}

// Copies a checked shard to `to` (tmp + rename) with its index's first_sample set to
// `first`: the blobs and the index length stay, the index and footer checksums change.
Status RewriteShard(const MappedFile& from, const std::string& to, uint64_t first, bool fsync, uint64_t* checksum) {
  const uint8_t* d = from.data();
  ShardFooter f = DecodeShardFooter(d + from.size() - kShardFooterSize);
  std::vector<uint8_t> index(d + f.index_offset, d + f.index_offset + f.index_length);
  if (Checksum64(index.data(), index.size()) != f.index_checksum)
    return Corruption(from.path() + ": index checksum mismatch");
  RETURN_IF_ERROR(detail::SetIndexFirstSample(&index, first, from.path()));
  f.index_checksum = Checksum64(index.data(), index.size());
  uint8_t footer[kShardFooterSize];
  EncodeShardFooter(f, d, footer);
  const std::string tmp = to + kTempSuffix;
  const Status written = WriteShardCopy(tmp, d, f.index_offset, index, footer, fsync);
  if (!written.ok()) {
    RemoveFile(tmp).IgnoreError();
    return written;
  }
  RETURN_IF_ERROR(RenameFile(tmp, to));
  *checksum = f.index_checksum;
  return Status::Ok();
}

// Moves (or, for a shifted part, copies with a new first_sample) every shard into `dir`
// under its number in the whole dataset. A shard an interrupted merge already moved is
// found at its new name.
Status PlaceShards(const std::string& dir, const std::vector<Part>& parts, bool fsync, MergeSummary* sum,
                   std::vector<ShardInfo>* shards) {
  for (const Part& p : parts) {
    for (const ShardInfo& s : p.manifest.shards) {
      ShardInfo placed = s;
      placed.file_name = ShardFileName(shards->size());
      placed.first_sample = s.first_sample - p.shift;
      const std::string from = JoinPath(p.dir, s.file_name), to = JoinPath(dir, placed.file_name);
      std::unique_ptr<MappedFile> mapped;
      if (PathExists(from)) {
        RETURN_IF_ERROR(CheckShardFile(from, s, &mapped).WithContext(Describe(p.info, p.dir)));
        if (p.shift == 0) {
          RETURN_IF_ERROR(RenameFile(from, to));
        } else {
          RETURN_IF_ERROR(RewriteShard(*mapped, to, placed.first_sample, fsync, &placed.index_checksum));
          ++sum->shards_rewritten;
          sum->bytes_rewritten += s.size_bytes;
        }
      } else if (p.shift == 0 && PathExists(to)) {
        RETURN_IF_ERROR(CheckShardFile(to, s, &mapped).WithContext(Describe(p.info, p.dir)));
      } else {
        return NotFound(Describe(p.info, p.dir) + ": shard " + from + " is missing; convert the part again");
      }
      shards->push_back(placed);
    }
  }
  // What an interrupted run left in `dir` (temporary files, shards beyond the last).
  std::set<std::string> keep;
  for (const ShardInfo& s : *shards) keep.insert(s.file_name);
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(dir));
  for (const std::string& name : names) {
    if (detail::IsDatasetFile(name) && keep.count(name) == 0) RETURN_IF_ERROR(RemoveFile(JoinPath(dir, name)));
  }
  return Status::Ok();
}

// DIR/<name> = the parts' files <name> in order, the first line (header) once.
Status MergeTable(const std::string& dir, const std::vector<Part>& parts, const std::string& name, bool fsync,
                  uint64_t* rows) {
  std::string out;
  for (const Part& p : parts) {
    const std::string path = JoinPath(p.dir, name);
    if (!PathExists(path)) continue;
    ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, ReadWholeFile(path, kMaxTableBytes));
    std::string text(bytes.begin(), bytes.end());
    if (!text.empty() && text.back() != '\n') text += '\n';
    const size_t header_end = text.find('\n') + 1;
    out += out.empty() ? text : text.substr(header_end);
    *rows +=
        static_cast<uint64_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(header_end), text.end(), '\n'));
  }
  const std::string target = JoinPath(dir, name);
  if (out.empty()) return RemoveFile(target);
  return WriteFileAtomic(target, out.data(), out.size(), fsync);
}

// The first part's companion file `name`, when it has one, becomes DIR/<name>.
Status MergeCopy(const std::string& dir, const std::vector<Part>& parts, const std::string& name, bool fsync) {
  for (const Part& p : parts) {
    const std::string path = JoinPath(p.dir, name);
    if (!PathExists(path)) continue;
    ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, ReadWholeFile(path, kMaxTableBytes));
    return WriteFileAtomic(JoinPath(dir, name), bytes.data(), bytes.size(), fsync);
  }
  return RemoveFile(JoinPath(dir, name));
}

// Per-field statistics of the whole dataset from the parts' (count, mean, stddev, min, max).
std::vector<FieldStats> CombineStats(const std::vector<Part>& parts) {
  std::vector<FieldStats> out;
  for (const FieldSpec& f : parts[0].manifest.fields) {
    Moments total;
    for (const Part& p : parts) {
      for (const FieldStats& s : p.manifest.stats) {
        if (s.field != f.name) continue;
        const double n = static_cast<double>(s.count);
        total.Merge(Moments{s.count, s.mean, s.stddev * s.stddev * n, s.min, s.max});
      }
    }
    if (total.n == 0) continue;
    out.push_back(
        {f.name, total.n, total.min, total.max, total.mean, std::sqrt(total.m2 / static_cast<double>(total.n))});
  }
  return out;
}

Manifest MergedManifest(const std::vector<Part>& parts, std::vector<ShardInfo> shards) {
  const Manifest& a = parts[0].manifest;
  Manifest m;
  m.format_version = a.format_version;
  m.fields = a.fields;
  m.classes = a.classes;
  m.provenance = a.provenance;
  m.provenance.options = WithoutPartKeys(a.provenance.options);
  m.provenance.options.push_back({kPartsKey, std::to_string(parts.size())});
  for (const Part& p : parts) {
    for (const SplitInfo& s : p.manifest.splits) {
      const uint64_t first = s.first_sample - p.shift;
      const SplitInfo* last = m.splits.empty() ? nullptr : &m.splits.back();
      if (last != nullptr && last->name == s.name && last->first_sample + last->num_samples == first) {
        m.splits.back().num_samples += s.num_samples;
      } else {
        m.splits.push_back({s.name, first, s.num_samples});
      }
    }
    m.num_samples += p.manifest.num_samples;
  }
  m.shards = std::move(shards);
  m.stats = CombineStats(parts);
  return m;
}

}  // namespace

Status RemoveParts(const std::string& dir) {
  const std::string root = JoinPath(dir, kPartsDirName);
  if (!IsDirectory(root)) return Status::Ok();
  ASSIGN_OR_RETURN(const auto found, ListParts(root));
  for (const auto& [k, path] : found) {
    ASSIGN_OR_RETURN(std::unique_ptr<FileLock> lock, Lock(path, "part directory " + path));
    RETURN_IF_ERROR(RemoveFile(JoinPath(path, kPartManifestFileName)));
    ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(path));
    for (const std::string& name : names)
      if (name != detail::kLockFileName) RETURN_IF_ERROR(RemoveFile(JoinPath(path, name)));
    lock.reset();  // removes the lock file
    RETURN_IF_ERROR(RemoveEmptyDir(path));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> left, ListDir(root));
  return left.empty() ? RemoveEmptyDir(root) : Status::Ok();  // hidden entries are no part's: left as they are
}

namespace {

// DIR already holds a manifest: the dataset merged from its parts (then finish removing
// the parts), or another dataset (refused).
Result<MergeSummary> AlreadyMerged(const std::string& dir) {
  const std::string path = JoinPath(dir, kManifestFileName);
  ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(const Manifest m, DecodeManifestFile(file->data(), file->size(), path));
  const std::string* parts = FindOption(m.provenance, kPartsKey);
  uint64_t count = 0;
  if (parts == nullptr || !ParseU64(*parts, &count) || count > kMaxParts)
    return AlreadyExists(dir + ": already holds a dataset that was not converted in parts");
  RETURN_IF_ERROR(RemoveParts(dir));
  MergeSummary sum;
  sum.already_merged = true;
  sum.parts = static_cast<uint32_t>(count);
  sum.samples = m.num_samples;
  sum.shards = m.shards.size();
  sum.splits = m.splits;
  return sum;
}

Result<MergeSummary> Merge(const std::string& dir, const MergeOptions& options) {
  if (PathExists(JoinPath(dir, kManifestFileName))) return AlreadyMerged(dir);
  ASSIGN_OR_RETURN(std::vector<Part> parts, LoadParts(dir));
  RETURN_IF_ERROR(CheckParts(parts));
  MergeSummary sum;
  std::vector<ShardInfo> shards;
  RETURN_IF_ERROR(PlaceShards(dir, parts, options.fsync, &sum, &shards));
  for (const std::string& table : options.tables)
    RETURN_IF_ERROR(MergeTable(dir, parts, table, options.fsync, &sum.table_rows));
  for (const std::string& name : options.copies) RETURN_IF_ERROR(MergeCopy(dir, parts, name, options.fsync));
  const Manifest m = MergedManifest(parts, std::move(shards));
  RETURN_IF_ERROR(ValidateManifest(m).WithContext(dir + ": the merged parts"));
  if (options.fsync) RETURN_IF_ERROR(FsyncDir(dir));
  const std::vector<uint8_t> bytes = EncodeManifestFile(m);
  RETURN_IF_ERROR(WriteFileAtomic(JoinPath(dir, kManifestFileName), bytes.data(), bytes.size(), options.fsync));
  sum.parts = static_cast<uint32_t>(parts.size());
  sum.samples = m.num_samples;
  sum.shards = m.shards.size();
  sum.splits = m.splits;
  parts.clear();  // unlocks the part directories
  RETURN_IF_ERROR(RemoveParts(dir).WithContext("merged, but the parts could not be removed (merge again to retry)"));
  return sum;
}

}  // namespace

Result<MergeSummary> MergeParts(const std::string& dir, const MergeOptions& options) {
  if (!IsDirectory(dir)) return NotFound(dir + ": no such directory");
  Result<std::unique_ptr<FileLock>> lock = Lock(dir, dir);
  if (!lock.ok()) return lock.status();
  return Merge(dir, options);
}

}  // namespace shardify
