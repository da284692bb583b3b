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
// status fails go to `bad`; hidden entries are skipped; directory symlinks are not followed.
Status ListFiles(const std::string& dir, bool recursive, std::vector<ListedFile>* files,
                 std::vector<BadEntry>* bad);

// Sorted names of the non-hidden subdirectories of `dir`.
Result<std::vector<std::string>> ListSubdirs(const std::string& dir);

// Parses CSV text (RFC 4180 quoting) into rows of fields. `path` names the file in errors.
Result<std::vector<std::vector<std::string>>> ParseCsv(const std::string& text, const std::string& path);
Result<std::string> ReadTextFile(const std::string& path);

bool ParseInt(const std::string& s, int64_t* v);
bool ParseDouble(const std::string& s, double* v);
std::string JsonQuote(const std::string& s);

Status PlanNnunet(const std::string& src, SourcePlan* plan);
Status PlanRle(const std::string& src, SourcePlan* plan);

}  // namespace shardify::convert::detail
