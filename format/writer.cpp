#include "format/writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "base/checksum.h"
#include "base/file.h"
#include "format/chunk_grid.h"
#include "format/codec_internal.h"
#include "format/destination_internal.h"
#include "format/moments.h"
#include "format/shard_index_internal.h"

namespace shardify {

FieldValue FieldValue::Array(std::vector<uint8_t> data, Shape shape) {
  FieldValue v;
  v.kind = FieldKind::kNdarray;
  v.bytes = std::move(data);
  v.shape = std::move(shape);
  return v;
}
FieldValue FieldValue::Int(int64_t x) {
  FieldValue v;
  v.kind = FieldKind::kInt;
  v.i = x;
  return v;
}
FieldValue FieldValue::Float(double x) {
  FieldValue v;
  v.kind = FieldKind::kFloat;
  v.f = x;
  return v;
}
FieldValue FieldValue::String(std::string s) {
  FieldValue v;
  v.kind = FieldKind::kString;
  v.bytes.assign(s.begin(), s.end());
  return v;
}
FieldValue FieldValue::Bytes(std::vector<uint8_t> b) {
  FieldValue v;
  v.kind = FieldKind::kBytes;
  v.bytes = std::move(b);
  return v;
}

struct EncodedChunk {
  Codec codec = Codec::kRaw;
  std::vector<uint8_t> stored;
  uint64_t raw_size = 0;
  uint64_t checksum = 0;
};

struct EncodedField {
  std::vector<EncodedChunk> chunks;  // chunked ndarray fields
  Codec codec = Codec::kRaw;
  std::vector<uint8_t> stored;  // ndarray blob, or string/bytes payload
  uint64_t raw_size = 0;
  uint64_t checksum = 0;
  Shape shape;
  int64_t i = 0;
  double f = 0;
  Moments moments;
};

struct EncodedSample {
  std::string split;
  std::vector<EncodedField> fields;
};

void EncodedSampleDeleter::operator()(EncodedSample* p) const { delete p; }

namespace {

// The bytes of a blob of `spec` as compressed: `data` itself, or, for a filtered field,
// the filter applied into *buf.
const uint8_t* Filtered(const FieldSpec& spec, const uint8_t* data, size_t size, std::vector<uint8_t>* buf) {
  if (spec.filter == Filter::kNone) return data;
  const size_t elem = DTypeSize(spec.dtype);
  buf->resize(size);
  if (spec.filter == Filter::kDeltaColumns) {  // a table: shape [rows, cols], cols fixed
    const auto cols = static_cast<size_t>(spec.shape.back());
    detail::DeltaColumns(data, buf->data(), size / elem / cols, cols, elem);
  } else {
    detail::ByteShuffle(data, buf->data(), size / elem, elem);
  }
  return buf->data();
}

template <typename T>
Moments MomentsOf(const uint8_t* bytes, uint64_t count) {
  Moments m;
  if (count == 0) return m;
  double sum = 0, sumsq = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (uint64_t k = 0; k < count; ++k) {
    T v;
    std::memcpy(&v, bytes + k * sizeof(T), sizeof(T));
    const auto d = static_cast<double>(v);
    if (std::isnan(d)) continue;
    sum += d;
    sumsq += d * d;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    ++m.n;
  }
  if (m.n == 0) return m;
  m.mean = sum / static_cast<double>(m.n);
  m.m2 = std::max(0.0, sumsq - sum * m.mean);
  m.min = lo;
  m.max = hi;
  return m;
}

Moments ComputeMoments(DType t, const uint8_t* bytes, uint64_t size) {
  switch (t) {
    case DType::kU8:
      return MomentsOf<uint8_t>(bytes, size);
    case DType::kI8:
      return MomentsOf<int8_t>(bytes, size);
    case DType::kU16:
      return MomentsOf<uint16_t>(bytes, size / 2);
    case DType::kI16:
      return MomentsOf<int16_t>(bytes, size / 2);
    case DType::kU32:
      return MomentsOf<uint32_t>(bytes, size / 4);
    case DType::kI32:
      return MomentsOf<int32_t>(bytes, size / 4);
    case DType::kF32:
      return MomentsOf<float>(bytes, size / 4);
    case DType::kF64:
      return MomentsOf<double>(bytes, size / 8);
    case DType::kI64:
      return MomentsOf<int64_t>(bytes, size / 8);
    case DType::kF16:
      return Moments{};  // not computed
  }
  return Moments{};
}

// The compression level of `field`: its entry in options.field_levels, else level.
int LevelOf(const WriterOptions& options, const std::string& field) {
  for (const auto& [name, level] : options.field_levels) {
    if (name == field) return level;
  }
  return options.level;
}

class EncoderImpl final : public Encoder {
 public:
  EncoderImpl(const std::vector<FieldSpec>* fields, const std::vector<std::shared_ptr<const detail::Dictionary>>* dicts,
              const WriterOptions* options)
      : fields_(fields), dicts_(dicts), options_(options) {
    for (const FieldSpec& f : *fields) levels_.push_back(LevelOf(*options, f.name));
  }

  Result<EncodedSamplePtr> Encode(SampleInput&& in) override {
    if (in.values.size() != fields_->size())
      return InvalidArgument("sample has " + std::to_string(in.values.size()) + " values, the schema has " +
                             std::to_string(fields_->size()) + " fields");
    if (in.split.empty()) return InvalidArgument("sample has an empty split name");
    EncodedSamplePtr out(new EncodedSample());
    out->split = std::move(in.split);
    out->fields.resize(fields_->size());
    for (size_t f = 0; f < fields_->size(); ++f) {
      const Status s = EncodeField(f, in.values[f], &out->fields[f]);
      if (!s.ok()) return s.WithContext("field '" + (*fields_)[f].name + "'");
    }
    return out;
  }

 private:
  Status EncodeField(size_t f, FieldValue& v, EncodedField* out) {
    const FieldSpec& spec = (*fields_)[f];
    if (v.kind != spec.kind)
      return InvalidArgument(std::string("value is ") + FieldKindName(v.kind) + ", the field is " +
                             FieldKindName(spec.kind));
    switch (spec.kind) {
      case FieldKind::kInt:
        out->i = v.i;
        return Status::Ok();
      case FieldKind::kFloat:
        out->f = v.f;
        return Status::Ok();
      case FieldKind::kString:
      case FieldKind::kBytes:
        out->stored = std::move(v.bytes);
        return Status::Ok();
      case FieldKind::kNdarray:
        break;
    }
    if (!ShapeMatches(spec.shape, v.shape))
      return InvalidArgument("shape " + ShapeToString(v.shape) + " does not fit the field's " +
                             ShapeToString(spec.shape));
    ASSIGN_OR_RETURN(const uint64_t bytes, ByteSize(v.shape, spec.dtype));
    if (bytes != v.bytes.size())
      return InvalidArgument("shape " + ShapeToString(v.shape) + " of " + DTypeName(spec.dtype) + " needs " +
                             std::to_string(bytes) + " bytes, got " + std::to_string(v.bytes.size()));
    out->shape = std::move(v.shape);
    out->raw_size = bytes;
    if (options_->compute_stats) out->moments = ComputeMoments(spec.dtype, v.bytes.data(), bytes);
    if (spec.chunked()) return EncodeChunks(f, v.bytes, out);
    if (detail::StoredInPlace(options_->codec) && spec.filter == Filter::kNone) {
      out->codec = options_->codec;  // the array itself, without a copy
      out->stored = std::move(v.bytes);
    } else {
      ASSIGN_OR_RETURN(out->codec, Compress(f, v.bytes.data(), v.bytes.size(), &out->stored));
    }
    out->checksum = Checksum64(out->stored.data(), out->stored.size());
    return Status::Ok();
  }

  // Applies the field's filter, then encodes with the writer's codec.
  Result<Codec> Compress(size_t f, const uint8_t* data, size_t size, std::vector<uint8_t>* stored) {
    data = Filtered((*fields_)[f], data, size, &shuffled_);
    return detail::EncodeBlob(options_->codec, codecs_, data, size, (*dicts_)[f].get(), levels_[f], options_->min_ratio,
                              stored);
  }

  // Cuts the array into the field's chunks (grid order, edges clipped) and compresses each.
  Status EncodeChunks(size_t f, const std::vector<uint8_t>& array, EncodedField* out) {
    const FieldSpec& spec = (*fields_)[f];
    ASSIGN_OR_RETURN(const ChunkGrid grid, MakeChunkGrid(out->shape, spec.chunk_shape));
    const size_t elem = DTypeSize(spec.dtype);
    const Shape zero(out->shape.size(), 0);
    Shape origin, extent;
    out->chunks.resize(grid.count);
    for (uint64_t k = 0; k < grid.count; ++k) {
      ChunkBox(grid, k, &origin, &extent);
      ASSIGN_OR_RETURN(const uint64_t bytes, ByteSize(extent, spec.dtype));
      scratch_.resize(bytes);
      CopyBox(array.data(), out->shape, origin, scratch_.data(), extent, zero, extent, elem);
      EncodedChunk& c = out->chunks[k];
      c.raw_size = bytes;
      ASSIGN_OR_RETURN(c.codec, Compress(f, scratch_.data(), bytes, &c.stored));
      c.checksum = Checksum64(c.stored.data(), c.stored.size());
    }
    return Status::Ok();
  }

  const std::vector<FieldSpec>* fields_;
  const std::vector<std::shared_ptr<const detail::Dictionary>>* dicts_;
  const WriterOptions* options_;
  detail::CodecContext codecs_;
  std::vector<int> levels_;  // per field
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> shuffled_;
};

class WriterImpl final : public DatasetWriter {
 public:
  WriterImpl(std::unique_ptr<detail::Destination> dest, std::vector<FieldSpec> fields, WriterOptions options)
      : dest_(std::move(dest)), dir_(dest_->write_dir()), options_(std::move(options)), builder_(&manifest_.fields) {
    manifest_.fields = std::move(fields);
    dicts_.resize(manifest_.fields.size());
    moments_.resize(manifest_.fields.size());
    for (const FieldSpec& f : manifest_.fields) {
      if (f.chunked()) version_ = std::max(version_, kFormatVersionChunks);
      if (f.filter != Filter::kNone) version_ = std::max(version_, kFormatVersionFilters);
      if (f.filter == Filter::kDeltaColumns) version_ = std::max(version_, kFormatVersionDeltaColumns);
    }
    manifest_.format_version = version_;
  }

  ~WriterImpl() override {
    if (finished_) return;
    shard_.reset();
    for (const auto& path : created_) RemoveFile(path).IgnoreError();
  }

  Status TrainDictionary(const std::string& field, const std::vector<std::vector<uint8_t>>& samples,
                         size_t dict_bytes) override {
    const int f = manifest_.FindField(field);
    if (f < 0 || manifest_.fields[f].kind != FieldKind::kNdarray)
      return InvalidArgument("no ndarray field named '" + field + "' to train a dictionary for");
    if (encoders_made_ || manifest_.num_samples > 0)
      return InvalidArgument("dictionaries must be trained before encoding starts");
    const detail::CodecSpec* codec = detail::FindCodec(options_.codec);
    if (codec->with_dictionary == codec->codec)
      return InvalidArgument(std::string("a dictionary needs a codec that uses one; the writer's codec is ") +
                             codec->name);
    std::vector<std::vector<uint8_t>> filtered;  // a dictionary learns from what is compressed
    if (manifest_.fields[f].filter != Filter::kNone) {
      for (const auto& s : samples) {
        filtered.emplace_back();
        Filtered(manifest_.fields[f], s.data(), s.size(), &filtered.back());
      }
    }
    const std::vector<std::vector<uint8_t>>& compressed = filtered.empty() ? samples : filtered;
    ASSIGN_OR_RETURN(std::vector<uint8_t> dict, detail::TrainDictionary(compressed, dict_bytes));
    const int level = LevelOf(options_, field);
    ASSIGN_OR_RETURN(const bool raw_literals, detail::RawLiteralsPay(compressed, dict, level));
    ASSIGN_OR_RETURN(dicts_[f], detail::Dictionary::Create(dict, level, raw_literals));
    manifest_.fields[f].dictionary = std::move(dict);
    return Status::Ok();
  }

  std::unique_ptr<Encoder> NewEncoder() override {
    encoders_made_ = true;
    return std::make_unique<EncoderImpl>(&manifest_.fields, &dicts_, &options_);
  }

  Status Append(SampleInput&& sample) override {
    if (!own_encoder_) own_encoder_ = NewEncoder();
    ASSIGN_OR_RETURN(auto encoded, own_encoder_->Encode(std::move(sample)));
    return Append(std::move(encoded));
  }

  Status Append(EncodedSamplePtr sample) override {
    if (!status_.ok()) return status_;
    if (finished_) return InvalidArgument("append after Finish");
    status_ = AppendSample(*sample);
    return status_;
  }

  Status Finish() override {
    if (!status_.ok()) return status_;
    if (finished_) return Status::Ok();
    status_ = FinishImpl();
    return status_;
  }

  Status WriteCompanion(const std::string& name, const void* data, size_t size) override {
    if (!status_.ok()) return status_;
    if (finished_) return InvalidArgument("companion file after Finish");
    if (!dest_->IsCompanion(name)) return InvalidArgument("'" + name + "' is not among the writer's companion files");
    const std::string path = JoinPath(dir_, name);
    created_.push_back(path + kTempSuffix);
    created_.push_back(path);
    status_ = WriteFileAtomic(path, data, size, options_.fsync);
    return status_;
  }

  uint64_t samples_written() const override { return manifest_.num_samples; }
  uint64_t bytes_written() const override { return bytes_done_ + (shard_ ? shard_->size() : 0); }
  const Manifest& manifest() const override { return manifest_; }

 private:
  bool part() const { return options_.part.count > 0; }

  Status StartSplit(const std::string& name) {
    if (!manifest_.splits.empty() && manifest_.splits.back().name == name) return Status::Ok();
    if (manifest_.FindSplit(name) != nullptr)
      return InvalidArgument("split '" + name + "' must be appended as one contiguous run, but it resumes at sample " +
                             std::to_string(first_ + manifest_.num_samples));
    manifest_.splits.push_back({name, first_ + manifest_.num_samples, 0});
    return Status::Ok();
  }

  Status OpenShard() {
    const std::string name = ShardFileName(manifest_.shards.size());
    const std::string tmp = JoinPath(dir_, name) + kTempSuffix;
    created_.push_back(tmp);
    ASSIGN_OR_RETURN(shard_, WritableFile::Create(tmp));
    EncodeFileHeader({kShardMagic, version_, 0}, header_);
    RETURN_IF_ERROR(shard_->Append(header_, sizeof header_));
    builder_.Reset(first_ + manifest_.num_samples);
    return Status::Ok();
  }

  Status AppendSample(EncodedSample& s) {
    if (s.fields.size() != manifest_.fields.size()) return Internal("encoded sample does not fit the schema");
    RETURN_IF_ERROR(StartSplit(s.split));
    if (!shard_) RETURN_IF_ERROR(OpenShard());
    for (size_t f = 0; f < s.fields.size(); ++f) RETURN_IF_ERROR(AppendField(f, s.fields[f]));
    builder_.EndSample();
    ++manifest_.num_samples;
    ++manifest_.splits.back().num_samples;
    if (shard_->size() >= options_.target_shard_bytes) return CloseShard();
    return Status::Ok();
  }

  Status AppendField(size_t f, EncodedField& v) {
    switch (manifest_.fields[f].kind) {
      case FieldKind::kInt:
        builder_.AddInt(f, v.i);
        return Status::Ok();
      case FieldKind::kFloat:
        builder_.AddFloat(f, v.f);
        return Status::Ok();
      case FieldKind::kString:
      case FieldKind::kBytes:
        builder_.AddData(f, std::string(v.stored.begin(), v.stored.end()));
        return Status::Ok();
      case FieldKind::kNdarray:
        break;
    }
    moments_[f].Merge(v.moments);
    if (manifest_.fields[f].chunked()) {
      std::vector<detail::BlobEntry> entries;
      entries.reserve(v.chunks.size());
      for (const EncodedChunk& c : v.chunks) {
        ASSIGN_OR_RETURN(const uint64_t offset, WriteBlob(c.codec, c.stored));
        entries.push_back({offset, c.stored.size(), c.raw_size, c.checksum, c.codec});
      }
      builder_.AddChunks(f, entries, v.shape);
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(const uint64_t offset, WriteBlob(v.codec, v.stored));
    builder_.AddBlob(f, {offset, v.stored.size(), v.raw_size, v.checksum, v.codec}, v.shape);
    return Status::Ok();
  }

  // Appends one blob and returns its offset. Raw blobs are aligned so they can be used in
  // place; compressed ones are packed.
  Result<uint64_t> WriteBlob(Codec codec, const std::vector<uint8_t>& stored) {
    if (detail::StoredInPlace(codec)) {
      const uint64_t pad = (kBlobAlignment - shard_->size() % kBlobAlignment) % kBlobAlignment;
      RETURN_IF_ERROR(shard_->AppendZeros(pad));
    }
    const uint64_t offset = shard_->size();
    RETURN_IF_ERROR(shard_->Append(stored.data(), stored.size()));
    return offset;
  }

  Status CloseShard() {
    const uint64_t pad = (kIndexAlignment - shard_->size() % kIndexAlignment) % kIndexAlignment;
    RETURN_IF_ERROR(shard_->AppendZeros(pad));
    const std::vector<uint8_t> index = builder_.Finish();
    ShardFooter footer;
    footer.index_offset = shard_->size();
    footer.index_length = index.size();
    footer.index_checksum = Checksum64(index.data(), index.size());
    footer.version = version_;
    uint8_t footer_bytes[kShardFooterSize];
    EncodeShardFooter(footer, header_, footer_bytes);
    RETURN_IF_ERROR(shard_->Append(index.data(), index.size()));
    RETURN_IF_ERROR(shard_->Append(footer_bytes, sizeof footer_bytes));
    if (options_.fsync) RETURN_IF_ERROR(shard_->Sync());
    RETURN_IF_ERROR(shard_->Close());
    const std::string name = ShardFileName(manifest_.shards.size());
    const std::string path = JoinPath(dir_, name);
    created_.push_back(path);
    RETURN_IF_ERROR(RenameFile(path + kTempSuffix, path));
    manifest_.shards.push_back({name, shard_->size(), first_ + manifest_.num_samples - builder_.num_samples(),
                                builder_.num_samples(), footer.index_checksum});
    bytes_done_ += shard_->size();
    shard_.reset();
    return Status::Ok();
  }

  // Names in provenance (kRawLiteralsKey) the fields whose dictionary frames store their
  // literals raw, as TrainDictionary decided, so that shardtool info shows the choice.
  void AddRawLiteralsKey() {
    std::string fields;
    for (size_t f = 0; f < dicts_.size(); ++f) {
      if (dicts_[f] == nullptr || !dicts_[f]->raw_literals()) continue;
      fields += (fields.empty() ? "" : ",") + manifest_.fields[f].name;
    }
    if (!fields.empty()) manifest_.provenance.options.push_back({kRawLiteralsKey, fields});
  }

  Status FinishImpl() {
    if (shard_) RETURN_IF_ERROR(CloseShard());
    manifest_.format_version = version_;
    manifest_.classes = options_.classes;
    manifest_.provenance = options_.provenance;
    AddRawLiteralsKey();
    if (part()) AddPartKeys(options_.part, &manifest_.provenance);
    for (size_t f = 0; f < manifest_.fields.size(); ++f) {
      const Moments& m = moments_[f];
      if (!options_.compute_stats || manifest_.fields[f].kind != FieldKind::kNdarray || m.n == 0) continue;
      manifest_.stats.push_back(
          {manifest_.fields[f].name, m.n, m.min, m.max, m.mean, std::sqrt(m.m2 / static_cast<double>(m.n))});
    }
    RETURN_IF_ERROR(ValidateManifest(manifest_, part() ? ManifestKind::kPart : ManifestKind::kDataset));
    if (options_.fsync) RETURN_IF_ERROR(FsyncDir(dir_));
    const std::vector<uint8_t> bytes = EncodeManifestFile(manifest_);
    const std::string path = JoinPath(dir_, part() ? kPartManifestFileName : kManifestFileName);
    created_.push_back(path + kTempSuffix);
    RETURN_IF_ERROR(WriteFileAtomic(path, bytes.data(), bytes.size(), options_.fsync));
    RETURN_IF_ERROR(dest_->Commit());
    finished_ = true;
    return Status::Ok();
  }

  std::unique_ptr<detail::Destination> dest_;  // locked while the writer lives
  std::string dir_;                            // where files are written (see Destination)
  WriterOptions options_;
  Manifest manifest_;
  std::vector<std::shared_ptr<const detail::Dictionary>> dicts_;
  detail::ShardIndexBuilder builder_;
  std::vector<Moments> moments_;
  std::unique_ptr<WritableFile> shard_;
  std::unique_ptr<Encoder> own_encoder_;
  uint8_t header_[kShardHeaderSize] = {};
  std::vector<std::string> created_;
  uint64_t bytes_done_ = 0;
  uint64_t first_ = part() ? options_.part.first_sample : 0;  // number of the first sample
  uint32_t version_ = 1;                                      // the oldest version that can hold the schema
  bool encoders_made_ = false;
  bool finished_ = false;
  Status status_;
};

// A codec with levels accepts only its own; one without ignores the level.
Status CheckLevel(const detail::CodecSpec& codec, int level, const std::string& of) {
  if (codec.max_level == 0 || (level >= codec.min_level && level <= codec.max_level)) return Status::Ok();
  return InvalidArgument(std::string(codec.name) + " level " + std::to_string(level) + of + " is outside " +
                         std::to_string(codec.min_level) + ".." + std::to_string(codec.max_level));
}

}  // namespace

Result<std::unique_ptr<DatasetWriter>> DatasetWriter::Create(const std::string& dir, std::vector<FieldSpec> fields,
                                                             const WriterOptions& options) {
  if (dir.empty()) return InvalidArgument("empty destination directory");
  const detail::CodecSpec* codec = detail::FindCodec(options.codec);
  if (codec == nullptr || codec->uses_dictionary)
    return InvalidArgument("the writer's codec is zstd or raw (a dictionary is set with TrainDictionary)");
  RETURN_IF_ERROR(CheckLevel(*codec, options.level, ""));
  if (options.target_shard_bytes == 0) return InvalidArgument("target shard size must be positive");
  if (options.part.count > 0) RETURN_IF_ERROR(ValidatePart(options.part));
  for (const auto& [field_name, level] : options.field_levels) {
    const std::string& name = field_name;
    const auto f = std::find_if(fields.begin(), fields.end(), [&](const FieldSpec& s) { return s.name == name; });
    if (f == fields.end() || f->kind != FieldKind::kNdarray)
      return InvalidArgument("compression level for '" + name + "', which is not an ndarray field");
    RETURN_IF_ERROR(CheckLevel(*codec, level, " of field '" + name + "'"));
  }
  Manifest probe;
  probe.format_version = kFormatVersion;
  probe.fields = fields;
  RETURN_IF_ERROR(ValidateManifest(probe));
  for (const auto& f : fields)
    if (!f.dictionary.empty())
      return InvalidArgument("field '" + f.name + "': dictionaries are set with TrainDictionary");
  ASSIGN_OR_RETURN(std::unique_ptr<detail::Destination> dest,
                   detail::Destination::Acquire(dir, options.overwrite, options.companions, options.fsync));
  return std::unique_ptr<DatasetWriter>(new WriterImpl(std::move(dest), std::move(fields), options));
}

}  // namespace shardify
