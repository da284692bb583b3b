#include "tools/show.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "format/dataset.h"
#include "media/nifti.h"
#include "tools/plane_internal.h"
#include "tools/tool_internal.h"

namespace shardify::tools {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxShownValues = 16;

std::string Hex(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += {kDigits[p[i] >> 4], kDigits[p[i] & 15]};
  return s;
}

json NiftiSummary(std::string_view bytes) {
  auto h = media::ParseStoredNiftiHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!h.ok()) return {{"error", h.status().message()}};
  std::vector<int64_t> dim(h->dim.begin() + 1, h->dim.begin() + 1 + h->dim[0]);
  std::vector<double> pixdim(h->pixdim.begin(), h->pixdim.begin() + 1 + h->dim[0]);
  return {{"version", h->version},
          {"big_endian", h->big_endian},
          {"dim", dim},
          {"datatype", h->datatype},
          {"bitpix", h->bitpix},
          {"pixdim", pixdim},
          {"vox_offset", media::VoxOffsetBytes(*h)},
          {"scl_slope", h->scl_slope},
          {"scl_inter", h->scl_inter},
          {"qform_code", h->qform_code},
          {"sform_code", h->sform_code}};
}

Result<json> ArrayJson(const FieldSpec& spec, const SampleView& s, size_t f, Decoder& d) {
  ASSIGN_OR_RETURN(Shape shape, s.shape(f));
  ASSIGN_OR_RETURN(detail::ArraySize size, detail::SizeOf(s, f, spec.chunked()));
  json j = {{"dtype", DTypeName(spec.dtype)}, {"shape", shape}, {"stored_bytes", size.stored}, {"raw_bytes", size.raw}};
  if (spec.chunked()) {
    j["codec"] = "chunked";
    j["chunk_shape"] = spec.chunk_shape;
    j["chunks"] = size.chunks;
  } else {
    ASSIGN_OR_RETURN(BlobInfo b, s.blob(f));
    char sum[24];
    std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(b.checksum));
    j["codec"] = CodecName(b.codec);
    j["checksum"] = sum;
  }
  const size_t es = DTypeSize(spec.dtype);
  if (size.raw / es <= kMaxShownValues) {
    ASSIGN_OR_RETURN(std::vector<uint8_t> raw, detail::DecodeArray(s, f, d));
    json values = json::array();
    for (size_t k = 0; k + es <= raw.size(); k += es) values.push_back(detail::ElementAsDouble(&raw[k], spec.dtype));
    j["values"] = values;
  }
  return j;
}

Result<json> FieldJson(const Manifest& m, const SampleView& s, size_t f, Decoder& d) {
  const FieldSpec& spec = m.fields[f];
  json j;
  switch (spec.kind) {
    case FieldKind::kNdarray: {
      ASSIGN_OR_RETURN(j, ArrayJson(spec, s, f, d));
      break;
    }
    case FieldKind::kInt: {
      ASSIGN_OR_RETURN(int64_t v, s.int_value(f));
      j["value"] = v;
      if (static_cast<int>(f) == detail::FindLabelField(m)) j["class"] = detail::ClassName(m, v);
      break;
    }
    case FieldKind::kFloat: {
      ASSIGN_OR_RETURN(double v, s.float_value(f));
      j["value"] = v;
      break;
    }
    case FieldKind::kString: {
      ASSIGN_OR_RETURN(std::string_view v, s.bytes_value(f));
      j["value"] = std::string(v);
      break;
    }
    case FieldKind::kBytes: {
      ASSIGN_OR_RETURN(std::string_view v, s.bytes_value(f));
      j["size"] = v.size();
      j["head"] = Hex(reinterpret_cast<const uint8_t*>(v.data()), std::min<size_t>(v.size(), 16));
      const std::string_view suffix = kNiftiHeaderSuffix;
      if (detail::MetaValue(spec, kMetaRole) == kRoleNiftiHeader ||
          (spec.name.size() > suffix.size() &&
           spec.name.compare(spec.name.size() - suffix.size(), suffix.size(), suffix) == 0)) {
        j["nifti"] = NiftiSummary(v);
      }
      break;
    }
  }
  j["name"] = spec.name;
  j["kind"] = FieldKindName(spec.kind);
  return j;
}

std::string Compact(const json& j) { return detail::Dump(j); }

void FieldText(const json& j, std::ostream& out) {
  char head[96];
  std::snprintf(head, sizeof head, "  %-22s %-8s ", j["name"].get<std::string>().c_str(),
                j["kind"].get<std::string>().c_str());
  out << head;
  if (j.contains("dtype")) {
    out << j["dtype"].get<std::string>() << " " << Compact(j["shape"]) << " " << j["codec"].get<std::string>() << " "
        << j["stored_bytes"] << "/" << j["raw_bytes"] << " bytes";
    if (j.contains("checksum")) out << " xxh3 " << j["checksum"].get<std::string>();
    if (j.contains("chunks")) out << " in " << j["chunks"] << " chunks of " << Compact(j["chunk_shape"]);
    if (j.contains("values")) out << "\n      values " << Compact(j["values"]);
  } else if (j.contains("value")) {
    out << (j["value"].is_string() ? j["value"].get<std::string>() : Compact(j["value"]));
    if (j.contains("class")) out << " (" << j["class"].get<std::string>() << ")";
  } else {
    out << j["size"] << " bytes: " << j["head"].get<std::string>() << (j["size"].get<size_t>() > 16 ? "..." : "");
    if (j.contains("nifti")) out << "\n      nifti " << Compact(j["nifti"]);
  }
  out << "\n";
}

// Character art of a plane: darker to brighter, two rows of pixels per character row.
void Preview(const detail::Plane& p, DType dtype, uint32_t cols, std::ostream& out) {
  static const char kRamp[] = " .:-=+*#%@";
  const std::vector<uint8_t> rgb = detail::ToRgb8(p, dtype);
  cols = std::min(std::max<uint32_t>(cols, 8), p.width);
  const uint32_t rows = std::max<uint32_t>(1, static_cast<uint32_t>(uint64_t(p.height) * cols / p.width / 2));
  out << "  preview " << p.width << "x" << p.height << " -> " << cols << "x" << rows << " characters\n";
  for (uint32_t r = 0; r < rows; ++r) {
    std::string line = "  |";
    for (uint32_t c = 0; c < cols; ++c) {
      const size_t y = uint64_t(r) * p.height / rows, x = uint64_t(c) * p.width / cols;
      const uint8_t* px = &rgb[(y * p.width + x) * 3];
      const int lum = (px[0] * 3 + px[1] * 6 + px[2]) / 10;
      line += kRamp[lum * 10 / 256];
    }
    out << line << "|\n";
  }
}

Status PreviewImage(const Manifest& m, const SampleView& s, const ShowOptions& o, Decoder& d, std::ostream& out) {
  const int f = detail::FindImageField(m);
  if (f < 0) return Status::Ok();
  ASSIGN_OR_RETURN(Shape shape, s.shape(f));
  ASSIGN_OR_RETURN(std::vector<uint8_t> raw, detail::DecodeArray(s, f, d));
  auto plane = detail::ExtractPlane(raw.data(), raw.size(), m.fields[f].dtype, shape);
  if (!plane.ok()) return Status::Ok();  // not an image: nothing to preview
  if (shape.size() == 4) out << "  middle slice z = " << shape[1] / 2 << " of " << shape[1] << "\n";
  Preview(*plane, m.fields[f].dtype, o.preview_cols, out);
  return Status::Ok();
}

}  // namespace

Status RunShow(const std::string& dir, uint64_t index, const ShowOptions& options, std::ostream& out) {
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, options.io));
  const Manifest& m = ds->manifest();
  if (index >= m.num_samples) {
    return OutOfRange("sample " + std::to_string(index) + " of " + ds->dir() + ": the dataset has " +
                      std::to_string(m.num_samples) + " samples");
  }
  ASSIGN_OR_RETURN(SampleView s, ds->Sample(index));
  Decoder d;
  detail::SplitCursor splits(m);
  json fields = json::array();
  for (size_t f = 0; f < m.fields.size(); ++f) {
    auto j = FieldJson(m, s, f, d);
    if (!j.ok()) return j.status().WithContext("sample " + std::to_string(index) + " field " + m.fields[f].name);
    fields.push_back(std::move(*j));
  }
  if (options.json) {
    out << detail::Dump(
               {{"sample", index}, {"split", splits.Name(index)}, {"shard", s.shard_file()}, {"fields", fields}})
        << "\n";
    return Status::Ok();
  }
  out << "sample " << index << " (split " << splits.Name(index) << ", shard " << s.shard_file() << ")\n";
  for (const json& j : fields) FieldText(j, out);
  if (options.preview) RETURN_IF_ERROR(PreviewImage(m, s, options, d, out));
  out.flush();
  return Status::Ok();
}

}  // namespace shardify::tools
