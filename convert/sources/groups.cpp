// Group-aware split assignment (--group-by): every case of a group lands in one split.
#include <algorithm>
#include <map>
#include <random>
// GCC 12 warns of maybe-uninitialized std::function members inside <regex> at -O2 with
// the sanitizers (a false positive in the standard library's own code).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop

#include "convert/sources/schema_internal.h"

namespace shardify::convert::detail {
namespace {

// The groups a layout's case names carry by themselves (`path` holds these names).
struct NaturalGroup {
  Layout layout;
  const char* keyword;
  const char* pattern;  // first capture group = the key
};

constexpr NaturalGroup kNaturalGroups[] = {
    {Layout::kRle, "case", "^(.+?)_day[^_]*_slice_[^_]*$"},  // case12_day3_slice_0001 -> case12
    {Layout::kRle, "day", "^(.+)_slice_[^_]*$"},             // -> case12_day3
    {Layout::kNnunet, "case", "^imagesT[rs]/(.+)$"},         // imagesTr/heart_004 -> heart_004
};

std::string NaturalGroupList() {
  std::string s;
  for (const NaturalGroup& g : kNaturalGroups) {
    s += std::string(s.empty() ? "" : ", ") + LayoutName(g.layout) + ": " + g.keyword;
  }
  return s;
}

// The regex --group-by stands for: a layout's natural group, or the text itself.
Result<std::string> GroupPattern(Layout layout, const std::string& group_by) {
  bool keyword = false;
  for (const NaturalGroup& g : kNaturalGroups) {
    if (group_by != g.keyword) continue;
    keyword = true;
    if (g.layout == layout) return std::string(g.pattern);
  }
  if (keyword) {
    return InvalidArgument("--group-by " + group_by + ": the " + LayoutName(layout) +
                           " layout has no such natural group (" + NaturalGroupList() +
                           "); give a regular expression over the path field instead, e.g. '^([^/]+)/'");
  }
  return group_by;
}

// The most frequent label of a group (ties: the smallest), for stratification.
int64_t GroupLabel(const std::vector<CaseInput>& cases, const std::vector<size_t>& members) {
  std::map<int64_t, size_t> count;
  for (size_t i : members) ++count[cases[i].label];
  return std::max_element(count.begin(), count.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
}

}  // namespace

Result<std::vector<std::string>> GroupKeys(const SourcePlan& plan, const std::vector<bool>& ok,
                                           const std::string& group_by) {
  ASSIGN_OR_RETURN(const std::string pattern, GroupPattern(plan.layout, group_by));
  std::vector<std::string> keys(plan.cases.size());
  try {
    const std::regex re(pattern, std::regex::ECMAScript);
    std::smatch m;
    for (size_t i = 0; i < plan.cases.size(); ++i) {
      if (!ok[i]) continue;
      const std::string& name = plan.cases[i].name;
      if (!std::regex_search(name, m, re)) {
        return InvalidArgument("--group-by '" + group_by + "': '" + pattern + "' does not match input " + name +
                               " (the value of its path field)");
      }
      keys[i] = m.size() > 1 && m[1].matched ? m[1].str() : m[0].str();
    }
  } catch (const std::regex_error& e) {
    return InvalidArgument("--group-by '" + group_by + "': not a regular expression: " + e.what());
  }
  return keys;
}

void AssignGroupSplits(std::vector<CaseInput>& cases, const std::vector<bool>& ok,
                       const std::vector<std::pair<std::string, double>>& split, uint64_t seed,
                       const std::vector<std::string>& groups) {
  std::map<std::string, std::vector<size_t>> members;  // key -> cases needing a split
  std::map<std::string, std::string> given;            // key -> a split one of its cases already has
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!ok[i]) continue;
    if (cases[i].split.empty())
      members[groups[i]].push_back(i);
    else
      given.emplace(groups[i], cases[i].split);
  }
  std::map<int64_t, std::vector<const std::vector<size_t>*>> strata;  // label -> groups
  for (const auto& [key, m] : members) {
    auto it = given.find(key);
    if (it != given.end()) {  // the layout placed part of this group: the rest follows it
      for (size_t i : m) cases[i].split = it->second;
      continue;
    }
    strata[GroupLabel(cases, m)].push_back(&m);
  }
  std::mt19937_64 rng(seed);
  for (auto& [label, list] : strata) {
    std::vector<size_t> order(list.size());
    double samples = 0;
    for (size_t g = 0; g < list.size(); ++g) {
      order[g] = g;
      samples += static_cast<double>(list[g]->size());
    }
    SeededShuffle(order, rng);
    // Each group goes to the split furthest below its share of the stratum's samples.
    std::vector<double> missing(split.size());
    for (size_t k = 0; k < split.size(); ++k) missing[k] = split[k].second * samples;
    for (size_t g : order) {
      const size_t k = static_cast<size_t>(std::max_element(missing.begin(), missing.end()) - missing.begin());
      for (size_t i : *list[g]) cases[i].split = split[k].first;
      missing[k] -= static_cast<double>(list[g]->size());
    }
  }
}

}  // namespace shardify::convert::detail
