#include "format/manifest.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "base/checksum.h"
#include "base/strings.h"
#include "format/layout.h"
#include "schemas/manifest_generated.h"

namespace shardify {

bool FieldSpec::operator==(const FieldSpec& o) const {
  return name == o.name && kind == o.kind && dtype == o.dtype && shape == o.shape && dictionary == o.dictionary &&
         meta == o.meta && chunk_shape == o.chunk_shape && filter == o.filter;
}
bool FieldSpec::variable_shape() const {
  for (int64_t d : shape)
    if (d < 0) return true;
  return false;
}
bool SplitInfo::operator==(const SplitInfo& o) const {
  return name == o.name && first_sample == o.first_sample && num_samples == o.num_samples;
}
bool ShardInfo::operator==(const ShardInfo& o) const {
  return file_name == o.file_name && size_bytes == o.size_bytes && first_sample == o.first_sample &&
         num_samples == o.num_samples && index_checksum == o.index_checksum;
}
bool FieldStats::operator==(const FieldStats& o) const {
  return field == o.field && count == o.count && min == o.min && max == o.max && mean == o.mean && stddev == o.stddev;
}
bool Provenance::operator==(const Provenance& o) const {
  return converter == o.converter && converter_version == o.converter_version && source == o.source &&
         options == o.options;
}
bool Manifest::operator==(const Manifest& o) const {
  return format_version == o.format_version && fields == o.fields && splits == o.splits && classes == o.classes &&
         shards == o.shards && provenance == o.provenance && stats == o.stats && num_samples == o.num_samples;
}

int Manifest::FindField(const std::string& name) const {
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == name) return static_cast<int>(i);
  return -1;
}

const SplitInfo* Manifest::FindSplit(const std::string& name) const {
  for (const auto& s : splits)
    if (s.name == name) return &s;
  return nullptr;
}

const char* FilterName(Filter f) {
  switch (f) {
    case Filter::kNone:
      return "none";
    case Filter::kByteShuffle:
      return "shuffle";
    case Filter::kDeltaColumns:
      return "delta_columns";
  }
  return "?";
}

namespace {

Status ValidateField(const FieldSpec& f, size_t i) {
  const std::string where = "field " + std::to_string(i) + " '" + f.name + "'";
  if (f.name.empty()) return InvalidArgument("field " + std::to_string(i) + " has an empty name");
  if (!IsValidFieldKind(static_cast<uint8_t>(f.kind)))
    return InvalidArgument(where + ": unknown kind " + std::to_string(static_cast<int>(f.kind)));
  if (f.kind != FieldKind::kNdarray) {
    if (!f.shape.empty() || !f.dictionary.empty() || f.chunked() || f.filter != Filter::kNone)
      return InvalidArgument(where + ": a scalar field has no shape, dictionary, chunks or filter");
    return Status::Ok();
  }
  if (f.filter != Filter::kNone && f.filter != Filter::kByteShuffle && f.filter != Filter::kDeltaColumns)
    return InvalidArgument(where + ": unknown filter " + std::to_string(static_cast<int>(f.filter)));
  if (f.filter == Filter::kDeltaColumns && (f.shape.size() != 2 || f.shape[1] < 1 || f.chunked()))
    return InvalidArgument(where +
                           ": delta columns need a table (rank 2, a fixed number of columns, not chunked), not " +
                           ShapeToString(f.shape));
  if (!IsValidDType(static_cast<uint8_t>(f.dtype)))
    return InvalidArgument(where + ": unknown dtype code " + std::to_string(static_cast<int>(f.dtype)));
  if (f.shape.size() > kMaxRank)
    return InvalidArgument(where + ": rank " + std::to_string(f.shape.size()) + " exceeds " + std::to_string(kMaxRank));
  for (int64_t d : f.shape)
    if (d < -1) return InvalidArgument(where + ": dimension " + std::to_string(d) + " is not >= -1");
  if (!f.variable_shape()) RETURN_IF_ERROR(ByteSize(f.shape, f.dtype).status().WithContext(where));
  if (f.chunked()) {
    if (f.chunk_shape.size() != f.shape.size() || f.shape.empty())
      return InvalidArgument(where + ": chunk shape " + ShapeToString(f.chunk_shape) + " does not have the rank of " +
                             ShapeToString(f.shape));
    for (int64_t d : f.chunk_shape)
      if (d < 1)
        return InvalidArgument(where + ": chunk shape " + ShapeToString(f.chunk_shape) + " has a dimension < 1");
    RETURN_IF_ERROR(ByteSize(f.chunk_shape, f.dtype).status().WithContext(where));
  }
  return Status::Ok();
}

// One file name in the dataset's folder, printable: no path separator (of any system), no
// control character (a name is shown in messages and goes into URLs), valid UTF-8, not a
// manifest's own name.
bool PlainFileName(const std::string& name) {
  const bool forbidden = std::any_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F || c == '/' || c == '\\';
  });
  return !name.empty() && name != "." && name != ".." && !forbidden && IsUtf8(name) && name != kManifestFileName &&
         name != kPartManifestFileName;
}

// Where a manifest's sample numbers start (see ManifestKind).
uint64_t FirstSample(const Manifest& m, ManifestKind kind) {
  if (kind == ManifestKind::kDataset) return 0;
  if (!m.shards.empty()) return m.shards.front().first_sample;
  return m.splits.empty() ? 0 : m.splits.front().first_sample;
}

Status ValidateRanges(const Manifest& m, ManifestKind kind) {
  const uint64_t first = FirstSample(m, kind);
  if (m.num_samples > UINT64_MAX - first)
    return InvalidArgument("samples [" + std::to_string(first) + ", +" + std::to_string(m.num_samples) +
                           ") run past the largest sample number");
  const uint64_t end = first + m.num_samples;
  uint64_t next = first;
  std::set<std::string> files;
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ShardInfo& s = m.shards[i];
    const std::string where = "shard " + std::to_string(i) + " '" + EscapeNonUtf8(s.file_name, true) + "'";
    if (!PlainFileName(s.file_name)) return InvalidArgument(where + ": not a plain file name");
    if (!files.insert(s.file_name).second) return InvalidArgument(where + ": file named twice");
    if (s.first_sample != next)
      return InvalidArgument(where + ": starts at sample " + std::to_string(s.first_sample) + ", expected " +
                             std::to_string(next));
    if (s.num_samples > end - next)
      return InvalidArgument(where + ": sample count runs past the dataset's " + std::to_string(m.num_samples));
    next += s.num_samples;
  }
  if (next != end)
    return InvalidArgument("shards cover " + std::to_string(next - first) + " samples, manifest says " +
                           std::to_string(m.num_samples));
  next = first;
  std::set<std::string> names;
  for (const SplitInfo& s : m.splits) {
    if (s.name.empty() || !names.insert(s.name).second)
      return InvalidArgument("split '" + s.name + "' is empty-named or named twice");
    if (s.first_sample != next || s.num_samples > end - next)
      return InvalidArgument("split '" + s.name + "' [" + std::to_string(s.first_sample) + ", +" +
                             std::to_string(s.num_samples) + ") does not continue at sample " + std::to_string(next));
    next += s.num_samples;
  }
  if (next != end)
    return InvalidArgument("splits cover " + std::to_string(next - first) + " samples, manifest says " +
                           std::to_string(m.num_samples));
  return Status::Ok();
}

}  // namespace

Status ValidateManifest(const Manifest& m, ManifestKind kind) {
  std::set<std::string> names;
  for (size_t i = 0; i < m.fields.size(); ++i) {
    RETURN_IF_ERROR(ValidateField(m.fields[i], i));
    if (m.fields[i].chunked() && m.format_version == 1)
      return InvalidArgument("field '" + m.fields[i].name + "' is chunked, which needs format version 2");
    if (m.fields[i].filter != Filter::kNone && m.format_version < kFormatVersionFilters)
      return InvalidArgument("field '" + m.fields[i].name + "' has a filter, which needs format version 3");
    if (m.fields[i].filter == Filter::kDeltaColumns && m.format_version < kFormatVersionDeltaColumns)
      return InvalidArgument("field '" + m.fields[i].name + "' has delta columns, which need format version 4");
    if (!names.insert(m.fields[i].name).second)
      return InvalidArgument("field name '" + m.fields[i].name + "' appears twice");
  }
  return ValidateRanges(m, kind);
}

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<flatbuffers::Vector<Offset<fb::KeyValue>>> BuildKeyValues(FlatBufferBuilder& b,
                                                                 const std::vector<KeyValue>& kvs) {
  std::vector<Offset<fb::KeyValue>> out;
  for (const auto& kv : kvs) out.push_back(fb::CreateKeyValueDirect(b, kv.key.c_str(), kv.value.c_str()));
  return b.CreateVector(out);
}

Offset<fb::Manifest> BuildManifest(FlatBufferBuilder& b, const Manifest& m) {
  std::vector<Offset<fb::Field>> fields;
  for (const auto& f : m.fields) {
    auto meta = BuildKeyValues(b, f.meta);
    // Created in the order earlier writers created them (the bytes depend on it).
    auto chunk_shape = b.CreateVector(f.chunk_shape);
    auto dict = b.CreateVector(f.dictionary);
    auto shape = b.CreateVector(f.shape);
    auto name = b.CreateString(f.name);
    // The order of fb::CreateField; `filter` only when set, so that manifests without
    // filters (written with forced defaults) stay byte-identical to versions 1 and 2.
    fb::FieldBuilder fb_field(b);
    fb_field.add_chunk_shape(chunk_shape);
    fb_field.add_meta(meta);
    fb_field.add_dictionary(dict);
    fb_field.add_shape(shape);
    fb_field.add_name(name);
    if (f.filter != Filter::kNone) fb_field.add_filter(static_cast<uint8_t>(f.filter));
    fb_field.add_dtype(static_cast<uint8_t>(f.dtype));
    fb_field.add_kind(static_cast<fb::FieldKind>(f.kind));
    fields.push_back(fb_field.Finish());
  }
  std::vector<Offset<fb::Split>> splits;
  for (const auto& s : m.splits)
    splits.push_back(fb::CreateSplitDirect(b, s.name.c_str(), s.first_sample, s.num_samples));
  std::vector<Offset<fb::Shard>> shards;
  for (const auto& s : m.shards)
    shards.push_back(
        fb::CreateShardDirect(b, s.file_name.c_str(), s.size_bytes, s.first_sample, s.num_samples, s.index_checksum));
  std::vector<Offset<fb::FieldStats>> stats;
  for (const auto& s : m.stats)
    stats.push_back(fb::CreateFieldStatsDirect(b, s.field.c_str(), s.count, s.min, s.max, s.mean, s.stddev));
  const Provenance& p = m.provenance;
  auto prov_options = BuildKeyValues(b, p.options);
  auto prov = fb::CreateProvenance(b, b.CreateString(p.converter), b.CreateString(p.converter_version),
                                   b.CreateString(p.source), prov_options);
  auto classes = b.CreateVectorOfStrings(m.classes);
  return fb::CreateManifest(b, m.format_version, m.num_samples, b.CreateVector(fields), b.CreateVector(splits), classes,
                            b.CreateVector(shards), prov, b.CreateVector(stats));
}

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::vector<KeyValue> ReadKeyValues(const flatbuffers::Vector<Offset<fb::KeyValue>>* v) {
  std::vector<KeyValue> out;
  if (v)
    for (const auto* kv : *v) out.push_back({Str(kv->key()), Str(kv->value())});
  return out;
}

template <typename T, typename F>
void ForEach(const flatbuffers::Vector<Offset<T>>* v, F&& f) {
  if (v)
    for (const T* item : *v) f(*item);
}

Manifest ReadManifest(const fb::Manifest& in) {
  Manifest m;
  m.format_version = in.format_version();
  m.num_samples = in.num_samples();
  ForEach(in.fields(), [&](const fb::Field& f) {
    FieldSpec spec;
    spec.name = Str(f.name());
    spec.kind = static_cast<FieldKind>(f.kind());
    spec.dtype = static_cast<DType>(f.dtype());
    if (f.shape()) spec.shape.assign(f.shape()->begin(), f.shape()->end());
    if (f.dictionary()) spec.dictionary.assign(f.dictionary()->begin(), f.dictionary()->end());
    spec.meta = ReadKeyValues(f.meta());
    if (f.chunk_shape()) spec.chunk_shape.assign(f.chunk_shape()->begin(), f.chunk_shape()->end());
    spec.filter = static_cast<Filter>(f.filter());
    m.fields.push_back(std::move(spec));
  });
  ForEach(in.splits(), [&](const fb::Split& s) {
    m.splits.push_back({Str(s.name()), s.first_sample(), s.num_samples()});
  });
  if (in.classes())
    for (const auto* c : *in.classes()) m.classes.push_back(Str(c));
  ForEach(in.shards(), [&](const fb::Shard& s) {
    m.shards.push_back({Str(s.file_name()), s.size_bytes(), s.first_sample(), s.num_samples(), s.index_checksum()});
  });
  if (const fb::Provenance* p = in.provenance())
    m.provenance = {Str(p->converter()), Str(p->converter_version()), Str(p->source()), ReadKeyValues(p->options())};
  ForEach(in.stats(), [&](const fb::FieldStats& s) {
    m.stats.push_back({Str(s.field()), s.count(), s.min(), s.max(), s.mean(), s.stddev()});
  });
  return m;
}

}  // namespace

std::vector<uint8_t> EncodeManifestFile(const Manifest& m) {
  FlatBufferBuilder b(4096);
  b.ForceDefaults(true);
  fb::FinishManifestBuffer(b, BuildManifest(b, m));
  const uint64_t body = b.GetSize();
  std::vector<uint8_t> out(kManifestHeaderSize + body + kManifestTrailerSize);
  EncodeFileHeader({kManifestMagic, m.format_version, 0}, out.data());
  std::memcpy(out.data() + kManifestHeaderSize, b.GetBufferPointer(), body);
  uint8_t* trailer = out.data() + kManifestHeaderSize + body;
  PutU64(trailer, body);
  PutU64(trailer + 8, Checksum64(out.data(), kManifestHeaderSize + body));
  std::memcpy(trailer + 16, kManifestMagic.data(), 8);
  return out;
}

Result<Manifest> DecodeManifestFile(const uint8_t* data, size_t size, const std::string& path, ManifestKind kind) {
  if (size < kManifestHeaderSize + kManifestTrailerSize)
    return Corruption(path + ": " + std::to_string(size) + " bytes is too small for a manifest");
  const FileHeader h = DecodeFileHeader(data);
  if (h.magic != kManifestMagic) return Corruption(path + ": bad head magic (not a shardify manifest)");
  const uint8_t* trailer = data + size - kManifestTrailerSize;
  if (std::memcmp(trailer + 16, kManifestMagic.data(), 8) != 0)
    return Corruption(path + ": bad tail magic (truncated manifest)");
  const uint64_t body = GetU64(trailer);
  if (body != size - kManifestHeaderSize - kManifestTrailerSize)
    return Corruption(path + ": body length " + std::to_string(body) + " disagrees with file size " +
                      std::to_string(size));
  const uint64_t sum = Checksum64(data, kManifestHeaderSize + body);
  if (sum != GetU64(trailer + 8)) return Corruption(path + ": manifest checksum mismatch");
  if (h.version == 0 || h.version > kFormatVersion)
    return Unsupported(path + ": format version " + std::to_string(h.version) +
                       " is not supported (this reader knows 1.." + std::to_string(kFormatVersion) + ")");
  if (h.flags != 0) return Unsupported(path + ": reserved flag bits set in the manifest header");
  const uint8_t* fbuf = data + kManifestHeaderSize;
  flatbuffers::Verifier verifier(fbuf, body, /*max_depth=*/16, /*max_tables=*/1u << 24);
  if (!fb::ManifestBufferHasIdentifier(fbuf) || !fb::VerifyManifestBuffer(verifier))
    return Corruption(path + ": manifest body fails the FlatBuffers verifier");
  Manifest m = ReadManifest(*fb::GetManifest(fbuf));
  if (m.format_version != h.version)
    return Corruption(path + ": body version " + std::to_string(m.format_version) + " differs from header version " +
                      std::to_string(h.version));
  const Status valid = ValidateManifest(m, kind);
  if (!valid.ok()) return Corruption(path + ": " + valid.message());
  return m;
}

}  // namespace shardify
