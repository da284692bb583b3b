#include "tools/info.h"

#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "base/strings.h"
#include "format/dataset.h"
#include "format/manifest_dict.h"
#include "format/writer.h"
#include "tools/tool_internal.h"

namespace shardify::tools {
namespace {

using nlohmann::json;

// Whether the writer gave field `f`'s dictionary frames raw literals (kRawLiteralsKey).
bool RawLiterals(const Manifest& m, const FieldSpec& f) {
  const std::vector<std::string> fields = SplitComma(MetaValue(m.provenance.options, kRawLiteralsKey));
  return std::find(fields.begin(), fields.end(), f.name) != fields.end();
}

json KeyValuesJson(const std::vector<KeyValue>& kv) {
  json j = json::object();
  for (const KeyValue& e : kv) j[e.key] = e.value;
  return j;
}

// Unlike the Python Dataset's `fields` (None for a scalar's dtype and for a variable
// extent, chunk_shape always there), every kind has a dtype here, a variable extent is -1
// and chunk_shape, filter and the dictionary's members appear only where they apply.
json FieldJson(const Manifest& m, const FieldSpec& f) {
  json j = {{"name", f.name}, {"kind", FieldKindName(f.kind)}};
  switch (f.kind) {
    case FieldKind::kNdarray:
      j["dtype"] = DTypeName(f.dtype);
      break;
    case FieldKind::kInt:
      j["dtype"] = "i64";
      break;
    case FieldKind::kFloat:
      j["dtype"] = "f64";
      break;
    default:
      j["dtype"] = FieldKindName(f.kind);
      break;
  }
  j["shape"] = f.kind == FieldKind::kNdarray ? json(f.shape) : json::array();
  if (f.chunked()) j["chunk_shape"] = f.chunk_shape;
  if (f.filter != Filter::kNone) j["filter"] = FilterName(f.filter);
  if (!f.dictionary.empty()) {
    j["dictionary_bytes"] = f.dictionary.size();
    j["literals"] = RawLiterals(m, f) ? "raw" : "huffman";
  }
  j["meta"] = KeyValuesJson(f.meta);
  return j;
}

// A FieldStats or the Provenance as the JSON object format/manifest_dict.h names.
template <typename Record>
json MembersJson(const Record& r) {
  json j = json::object();
  ForEachMember(r, [&j](const char* name, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::vector<KeyValue>>) {
      j[name] = KeyValuesJson(value);
    } else {
      j[name] = value;
    }
  });
  return j;
}

// What one pass over the shard indices yields.
struct Tally {
  std::vector<uint64_t> class_counts;  // by label; index classes.size() = other labels
  uint64_t unlabeled = 0;
  uint64_t raw_bytes = 0;
};

Result<Tally> CountOverIndex(const Dataset& ds) {
  const Manifest& m = ds.manifest();
  const int label = detail::FindLabelField(m);
  Tally t;
  t.class_counts.assign(m.classes.size() + 1, 0);
  for (uint64_t i = 0; i < m.num_samples; ++i) {
    ASSIGN_OR_RETURN(SampleView s, ds.Sample(i));
    for (size_t f = 0; f < m.fields.size(); ++f) {
      if (m.fields[f].kind != FieldKind::kNdarray) continue;
      ASSIGN_OR_RETURN(uint64_t raw, s.raw_size(f));
      t.raw_bytes += raw;
    }
    if (label < 0) continue;
    ASSIGN_OR_RETURN(int64_t v, s.int_value(label));
    if (v < 0) {
      ++t.unlabeled;
    } else {
      ++t.class_counts[std::min<uint64_t>(static_cast<uint64_t>(v), m.classes.size())];
    }
  }
  return t;
}

uint64_t StoredBytes(const Manifest& m) {
  uint64_t n = 0;
  for (const ShardInfo& s : m.shards) n += s.size_bytes;
  return n;
}

double Ratio(uint64_t raw, uint64_t stored) {
  return stored == 0 ? 0.0 : static_cast<double>(raw) / static_cast<double>(stored);
}

Status InfoJson(const Dataset& ds, std::ostream& out) {
  const Manifest& m = ds.manifest();
  detail::JsonObjectStream o(out);
  o.Put("dataset", ds.dir());
  o.Put("format_version", m.format_version);
  o.Put("samples", m.num_samples);
  o.Put("shards", m.shards.size());
  json splits = json::object();
  for (const SplitInfo& s : m.splits) splits[s.name] = s.num_samples;
  o.Put("splits", splits);
  json fields = json::array();
  for (const FieldSpec& f : m.fields) fields.push_back(FieldJson(m, f));
  o.Put("fields", fields);
  o.Put("classes", m.classes);
  json shards = json::array();
  for (const ShardInfo& s : m.shards) {
    shards.push_back(
        {{"file", s.file_name}, {"bytes", s.size_bytes}, {"first_sample", s.first_sample}, {"samples", s.num_samples}});
  }
  o.Put("shard_files", shards);
  o.Put("provenance", MembersJson(m.provenance));
  json stats = json::array();
  for (const FieldStats& s : m.stats) stats.push_back(MembersJson(s));
  o.Put("stats", stats);
  out.flush();
  ASSIGN_OR_RETURN(Tally t, CountOverIndex(ds));
  json counts = json::object();
  for (size_t c = 0; c < m.classes.size(); ++c) counts[m.classes[c]] = t.class_counts[c];
  if (t.class_counts.back() > 0) counts["(other)"] = t.class_counts.back();
  if (t.unlabeled > 0) counts["(unlabeled)"] = t.unlabeled;
  o.Put("class_counts", counts);
  const uint64_t stored = StoredBytes(m);
  o.Put("stored_bytes", stored);
  o.Put("raw_bytes", t.raw_bytes);
  o.Put("ratio", Ratio(t.raw_bytes, stored));
  o.End();
  return Status::Ok();
}

void WriteFieldsText(const Manifest& m, std::ostream& out) {
  out << "fields    " << m.fields.size() << "\n";
  for (const FieldSpec& f : m.fields) {
    char line[160];
    const std::string type = f.kind == FieldKind::kNdarray ? DTypeName(f.dtype) : FieldKindName(f.kind);
    const std::string shape = f.kind == FieldKind::kNdarray ? ShapeToString(f.shape) : "";
    std::snprintf(line, sizeof line, "  %-22s %-8s %-18s", f.name.c_str(), type.c_str(), shape.c_str());
    out << line;
    if (f.chunked()) out << " chunks=" << ShapeToString(f.chunk_shape);
    if (f.filter != Filter::kNone) out << " filter=" << FilterName(f.filter);
    if (!f.dictionary.empty()) {
      out << " dictionary=" << detail::HumanBytes(f.dictionary.size())
          << " literals=" << (RawLiterals(m, f) ? "raw" : "huffman");
    }
    for (const KeyValue& kv : f.meta) {
      out << " " << kv.key << "=" << (kv.value.size() > 60 ? kv.value.substr(0, 57) + "..." : kv.value);
    }
    out << "\n";
  }
}

void WriteHeadText(const Dataset& ds, const InfoOptions& options, std::ostream& out) {
  const Manifest& m = ds.manifest();
  out << "dataset   " << ds.dir() << " (format version " << m.format_version << ")\n";
  out << "samples   " << m.num_samples << " in " << m.splits.size() << " split(s):";
  for (const SplitInfo& s : m.splits) out << " " << s.name << " " << s.num_samples;
  out << "\n";
  WriteFieldsText(m, out);
  out << "shards    " << m.shards.size() << ", " << detail::HumanBytes(StoredBytes(m)) << "\n";
  if (options.list_shards) {
    for (const ShardInfo& s : m.shards) {
      out << "  " << s.file_name << "  samples " << s.first_sample << ".." << s.first_sample + s.num_samples << "  "
          << detail::HumanBytes(s.size_bytes) << "\n";
    }
  }
  const Provenance& p = m.provenance;
  out << "source    " << (p.source.empty() ? "-" : p.source) << " (" << p.converter
      << (p.converter_version.empty() ? "" : " " + p.converter_version) << ")";
  for (const KeyValue& kv : p.options) out << " " << kv.key << "=" << kv.value;
  out << "\n";
  for (const FieldStats& s : m.stats) {
    char line[200];
    std::snprintf(line, sizeof line, "stats     %-14s min %g max %g mean %g std %g\n", s.field.c_str(), s.min, s.max,
                  s.mean, s.stddev);
    out << line;
  }
}

Status InfoText(const Dataset& ds, const InfoOptions& options, std::ostream& out) {
  const Manifest& m = ds.manifest();
  WriteHeadText(ds, options, out);
  out.flush();
  ASSIGN_OR_RETURN(Tally t, CountOverIndex(ds));
  const uint64_t stored = StoredBytes(m);
  char line[160];
  std::snprintf(line, sizeof line, "bytes     stored %s, raw %s, ratio %.2fx\n", detail::HumanBytes(stored).c_str(),
                detail::HumanBytes(t.raw_bytes).c_str(), Ratio(t.raw_bytes, stored));
  out << line;
  out << "classes   " << m.classes.size() << "\n";
  for (size_t c = 0; c < m.classes.size(); ++c) {
    std::snprintf(line, sizeof line, "  %4zu  %-24s %llu\n", c, m.classes[c].c_str(),
                  static_cast<unsigned long long>(t.class_counts[c]));
    out << line;
  }
  if (t.class_counts.back() > 0) out << "  other labels  " << t.class_counts.back() << "\n";
  if (t.unlabeled > 0) out << "  unlabeled     " << t.unlabeled << "\n";
  out.flush();
  return Status::Ok();
}

}  // namespace

Status RunInfo(const std::string& dir, const InfoOptions& options, std::ostream& out) {
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, options.io));
  return options.json ? InfoJson(*ds, out) : InfoText(*ds, options, out);
}

}  // namespace shardify::tools
