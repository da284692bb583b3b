// Helpers shared by the layout planners (internal).
#pragma once

#include <string>
#include <vector>

#include "convert/source.h"

namespace shardify::convert::detail {

struct ListedFile {
  std::string rel;  // relative to the listed directory, '/'-separated
  std::string abs;
};

// Regular files under `dir` (recursively when `recursive`), sorted by `rel`. Entries whose
// status fails go to `bad`; hidden entries are skipped; directory symlinks are not followed;
// the directory `excluded` (SourcePlan::excluded; "" for none) is never entered.
Status ListFiles(const std::string& dir, bool recursive, std::vector<ListedFile>* files,
                 std::vector<BadEntry>* bad, const std::string& excluded);

// Sorted names of the non-hidden subdirectories of `dir`, other than `excluded`. Directory
// symlinks are not followed: their names go to `links` (when non-null), not to the result.
Result<std::vector<std::string>> ListSubdirs(const std::string& dir, const std::string& excluded,
                                             std::vector<std::string>* links = nullptr);

// Parses CSV text (RFC 4180 quoting) into rows of fields. `path` names the file in errors.
Result<std::vector<std::vector<std::string>>> ParseCsv(const std::string& text, const std::string& path);
Result<std::string> ReadTextFile(const std::string& path);

bool ParseInt(const std::string& s, int64_t* v);
bool ParseDouble(const std::string& s, double* v);
std::string JsonQuote(const std::string& s);
// "1.5 MiB", "312 B".
std::string HumanBytes(uint64_t b);

Status PlanNnunet(const std::string& src, SourcePlan* plan);
Status PlanRle(const std::string& src, SourcePlan* plan);

}  // namespace shardify::convert::detail
