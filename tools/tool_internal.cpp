#include "tools/tool_internal.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "base/strings.h"
#include "format/layout.h"

namespace shardify::tools::detail {

Result<std::unique_ptr<Dataset>> OpenDataset(const std::string& dir, IoMode io) {
  ReadOptions options;
  options.io = io;
  return Dataset::Open(dir, options);  // its errors name the directory and file
}

Result<size_t> ResolveArrayField(const Manifest& m, const std::string& name) {
  int i = name.empty() ? FindImageField(m) : m.FindField(name);
  if (i < 0) {
    return NotFound(name.empty() ? std::string("the dataset has no ndarray field") : "no field named '" + name + "'");
  }
  if (m.fields[i].kind != FieldKind::kNdarray) {
    return InvalidArgument("field '" + m.fields[i].name + "' is a " + FieldKindName(m.fields[i].kind) +
                           ", not an ndarray");
  }
  return static_cast<size_t>(i);
}

std::string ClassName(const Manifest& m, int64_t label) {
  if (label < 0) return "-";
  if (static_cast<uint64_t>(label) < m.classes.size()) return m.classes[label];
  return std::to_string(label);
}

const std::string& SplitCursor::Name(uint64_t index) {
  const auto& splits = m_.splits;
  if (splits.empty()) return none_;
  if (at_ >= splits.size() || index < splits[at_].first_sample) at_ = 0;
  while (at_ < splits.size() && index >= splits[at_].first_sample + splits[at_].num_samples) {
    ++at_;
  }
  if (at_ >= splits.size()) {
    at_ = 0;
    return none_;
  }
  return splits[at_].name;
}

Result<Range> SplitRange(const Manifest& m, const std::string& name) {
  if (name.empty()) return Range{0, m.num_samples};
  const SplitInfo* s = m.FindSplit(name);
  if (s == nullptr) {
    std::string known;
    for (const SplitInfo& x : m.splits) known += (known.empty() ? "" : ", ") + x.name;
    return NotFound("no split named '" + name + "' (splits: " + known + ")");
  }
  return Range{s->first_sample, s->first_sample + s->num_samples};
}

Result<ArraySize> SizeOf(const SampleView& s, size_t field, bool chunked) {
  ArraySize a;
  ASSIGN_OR_RETURN(a.raw, s.raw_size(field));
  if (!chunked) {
    ASSIGN_OR_RETURN(BlobInfo b, s.blob(field));
    a.stored = b.stored_size;
    return a;
  }
  ASSIGN_OR_RETURN(a.chunks, s.num_chunks(field));
  for (uint64_t k = 0; k < a.chunks; ++k) {
    ASSIGN_OR_RETURN(BlobInfo b, s.chunk(field, k));
    a.stored += b.stored_size;
  }
  return a;
}

Result<std::vector<uint8_t>> DecodeArray(const SampleView& s, size_t field, Decoder& d) {
  ASSIGN_OR_RETURN(uint64_t raw_size, s.raw_size(field));
  std::vector<uint8_t> out(raw_size);
  RETURN_IF_ERROR(s.Decode(field, out.data(), out.size(), d));
  return out;
}

std::string HumanBytes(uint64_t n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

namespace {

// `s` as a JSON string literal: well-formed UTF-8 as it is (", \ and control characters
// escaped), and every byte that is not part of well-formed UTF-8, 0xHH, as \udcHH: the code
// point Python's surrogateescape decodes it to, so that
// os.fsencode(json.loads(text)) gives back the stored bytes.
void AppendString(std::string& out, std::string_view s) {
  out += '"';
  while (!s.empty()) {
    size_t n = Utf8SequenceLength(s);
    const auto c = static_cast<unsigned char>(s[0]);
    char escape[8];
    if (n == 0) {
      std::snprintf(escape, sizeof escape, "\\udc%02x", c);
      out += escape;
      n = 1;
    } else if (n > 1) {
      out.append(s.data(), n);
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += static_cast<char>(c);
    }
    s.remove_prefix(n);
  }
  out += '"';
}

void AppendJson(std::string& out, const nlohmann::json& j) {
  if (j.is_string()) {
    AppendString(out, j.get_ref<const std::string&>());
  } else if (j.is_object()) {
    out += '{';
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it != j.begin()) out += ',';
      AppendString(out, it.key());
      out += ':';
      AppendJson(out, it.value());
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out += ',';
      AppendJson(out, j[i]);
    }
    out += ']';
  } else {
    out += j.dump();  // numbers, booleans, null
  }
}

}  // namespace

std::string Dump(const nlohmann::json& j) {
  std::string out;
  AppendJson(out, j);
  return out;
}

JsonObjectStream::JsonObjectStream(std::ostream& out) : out_(out) { out_ << "{"; }

void JsonObjectStream::Key(const std::string& key) {
  out_ << (first_member_ ? "\n  " : ",\n  ") << Dump(nlohmann::json(key)) << ": ";
  first_member_ = false;
}

void JsonObjectStream::Put(const std::string& key, const nlohmann::json& value) {
  Key(key);
  out_ << Dump(value);
}

void JsonObjectStream::BeginArray(const std::string& key) {
  Key(key);
  out_ << "[";
  first_item_ = true;
}

void JsonObjectStream::Item(const nlohmann::json& value) {
  out_ << (first_item_ ? "\n    " : ",\n    ") << Dump(value);
  first_item_ = false;
}

void JsonObjectStream::EndArray() { out_ << (first_item_ ? "]" : "\n  ]"); }

void JsonObjectStream::End() { out_ << "\n}\n" << std::flush; }

}  // namespace shardify::tools::detail
