// Option parsing helpers and the human summary (see convert.h).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "convert/convert.h"
#include "convert/sources/source_internal.h"

namespace shardify::convert {
namespace {

// "12.34 s, 5600 files/s": the rate with three significant digits below 100 (volumes:
// "0.375 files/s"), none when there is no rate to give.
std::string TimeAndRate(uint64_t samples, double seconds) {
  char t[96];
  const double rate = seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
  if (rate <= 0) {
    std::snprintf(t, sizeof t, "%.2f s", seconds);
  } else {
    std::snprintf(t, sizeof t, rate >= 100 ? "%.2f s, %.0f files/s" : "%.2f s, %.3g files/s", seconds, rate);
  }
  return t;
}

}  // namespace

Result<std::vector<std::pair<std::string, double>>> ParseSplitSpec(const std::string& spec) {
  std::vector<std::pair<std::string, double>> out;
  std::stringstream ss(spec);
  std::string item;
  double total = 0;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    double f = 0;
    if (eq == std::string::npos || eq == 0 || !detail::ParseDouble(item.substr(eq + 1), &f) || !(f > 0)) {
      return InvalidArgument("--split: '" + item + "' is not name=fraction with a fraction > 0");
    }
    std::string name = item.substr(0, eq);
    for (const auto& [n, x] : out) {
      if (n == name) return InvalidArgument("--split: split '" + name + "' is named twice");
    }
    out.push_back({name, f});
    total += f;
  }
  if (out.empty()) return InvalidArgument("--split: empty specification");
  if (std::fabs(total - 1.0) > 1e-6) {
    return InvalidArgument("--split: fractions sum to " + std::to_string(total) + ", expected 1");
  }
  return out;
}

namespace detail {

std::string HumanBytes(uint64_t b) {
  char buf[64];
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, unit[u]);
  return buf;
}

}  // namespace detail

std::string FormatSummary(const ConvertSummary& s) {
  std::ostringstream o;
  if (s.part.count > 0) {
    using State = ConvertSummary::PartState;
    o << "part " << PartName(s.part) << ": samples [" << s.part.first_sample << ", "
      << s.part.first_sample + s.part.samples << ") of " << s.part_of
      << (s.part_state == State::kComplete ? ", complete already: nothing converted (--overwrite converts it again)"
          : s.part_state == State::kMerged ? ", merged already: nothing converted; the dataset is:"
                                           : "")
      << "\n";
  }
  o << (s.dry_run ? "dry run (nothing written): " : "") << s.samples << " samples, layout " << s.layout << "\n";
  o << "  splits:";
  for (const auto& sp : s.splits) o << " " << sp.name << "=" << sp.samples;
  if (s.groups > 0) o << " (" << s.groups << " groups, each in one split)";
  o << "\n";
  if (!s.classes.empty()) {
    o << "  classes (" << s.classes.size() << "):";
    for (const auto& c : s.classes) o << " " << c;
    o << "\n";
  }
  o << "  fields:";
  for (size_t i = 0; i < s.fields.size(); ++i) o << (i ? "; " : " ") << s.fields[i];
  o << "\n";
  for (const auto& p : s.preprocessing) o << "  preprocessing: " << p << "\n";
  const bool converted = s.part_state == ConvertSummary::PartState::kConverted;
  if (!s.dry_run && !converted) {
    o << "  bytes out " << detail::HumanBytes(s.bytes_out) << " (" << s.shards << " shard" << (s.shards == 1 ? "" : "s")
      << ")" << (s.dictionary ? ", zstd dictionary" : "") << "\n";
  } else if (!s.dry_run) {
    char line[256];
    double ratio = s.bytes_in > 0 ? static_cast<double>(s.bytes_out) / static_cast<double>(s.bytes_in) : 0.0;
    std::snprintf(line, sizeof line, "  bytes in %s, out %s (%zu shard%s), ratio %.3f%s\n",
                  detail::HumanBytes(s.bytes_in).c_str(), detail::HumanBytes(s.bytes_out).c_str(),
                  static_cast<size_t>(s.shards), s.shards == 1 ? "" : "s", ratio,
                  s.codec == "raw" ? ", stored raw"
                  : s.dictionary   ? ", zstd dictionary"
                                   : "");
    o << line;
  }
  if (converted) o << "  " << TimeAndRate(s.samples, s.seconds) << "\n";
  if (!s.uploaded_to.empty()) {
    o << "  uploaded " << s.uploaded_objects << " objects to " << s.uploaded_to << ", the manifest last\n";
  }
  if (s.ignored_files > 0) o << "  ignored " << s.ignored_files << " file(s) that are not inputs of this layout\n";
  if (!s.skipped.empty()) {
    o << "  skipped " << s.skipped.size() << " input(s)" << (s.dry_run ? "" : ", listed in skipped.tsv") << ":\n";
    for (size_t i = 0; i < s.skipped.size() && i < 5; ++i) o << "    " << s.skipped[i].reason << "\n";
    if (s.skipped.size() > 5) o << "    ...\n";
  }
  for (const auto& w : s.warnings) o << "  warning: " << w << "\n";
  return o.str();
}

}  // namespace shardify::convert
