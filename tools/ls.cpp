#include <algorithm>
#include <cstdio>

#include "format/dataset.h"
#include "tools/info.h"
#include "tools/tool_internal.h"

namespace shardify::tools {
namespace {

struct Row {
  uint64_t index = 0;
  int64_t label = -1;
  Shape shape;
  uint64_t stored = 0;
  std::string shard;
};

Result<Row> ReadRow(const Dataset& ds, uint64_t index, int image, int label) {
  const Manifest& m = ds.manifest();
  ASSIGN_OR_RETURN(SampleView s, ds.Sample(index));
  Row r;
  r.index = index;
  r.shard = s.shard_file();
  if (label >= 0) {
    ASSIGN_OR_RETURN(r.label, s.int_value(label));
  }
  if (image >= 0) {
    ASSIGN_OR_RETURN(r.shape, s.shape(image));
  }
  for (size_t f = 0; f < m.fields.size(); ++f) {
    if (m.fields[f].kind != FieldKind::kNdarray) continue;
    ASSIGN_OR_RETURN(detail::ArraySize a, detail::SizeOf(s, f, m.fields[f].chunked()));
    r.stored += a.stored;
  }
  return r;
}

}  // namespace

Status RunLs(const std::string& dir, const LsOptions& options, std::ostream& out) {
  ASSIGN_OR_RETURN(auto ds, detail::OpenDataset(dir, options.io));
  const Manifest& m = ds->manifest();
  ASSIGN_OR_RETURN(detail::Range range, detail::SplitRange(m, options.split));
  const uint64_t first = range.first + std::min(options.offset, range.end - range.first);
  uint64_t end = range.end;
  if (options.limit > 0 && end - first > options.limit) end = first + options.limit;
  const int image = detail::FindImageField(m);
  const int label = detail::FindLabelField(m);
  detail::SplitCursor splits(m);
  if (options.json) {
    out << "[";
  } else {
    char head[160];
    std::snprintf(head, sizeof head, "%10s  %-10s %-20s %-20s %12s  %s\n", "index", "split", "label", "shape", "stored",
                  "shard");
    out << head;
  }
  out.flush();
  for (uint64_t i = first; i < end; ++i) {
    auto row = ReadRow(*ds, i, image, label);
    if (!row.ok()) {
      if (options.json) out << "]\n";
      out.flush();
      return row.status();
    }
    const Row& r = *row;
    const std::string& split = splits.Name(i);
    if (options.json) {
      nlohmann::json j = {{"index", r.index},
                          {"split", split},
                          {"label", label >= 0 ? nlohmann::json(r.label) : nlohmann::json()},
                          {"class", label >= 0 ? detail::ClassName(m, r.label) : ""},
                          {"shape", r.shape},
                          {"stored_bytes", r.stored},
                          {"shard", r.shard}};
      out << (i == first ? "\n  " : ",\n  ") << detail::Dump(j);
    } else {
      const std::string lab = label < 0 ? "-" : std::to_string(r.label) + " " + detail::ClassName(m, r.label);
      char line[256];
      std::snprintf(line, sizeof line, "%10llu  %-10s %-20s %-20s %12llu  %s\n", static_cast<unsigned long long>(i),
                    split.c_str(), lab.c_str(), ShapeToString(r.shape).c_str(),
                    static_cast<unsigned long long>(r.stored), r.shard.c_str());
      out << line;
    }
    if ((i - first) % 4096 == 0) out.flush();
  }
  if (options.json) out << (end > first ? "\n]\n" : "]\n");
  out.flush();
  return Status::Ok();
}

}  // namespace shardify::tools
