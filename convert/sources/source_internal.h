// Helpers shared by the layout planners (internal).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/sources/source.h"

namespace shardify::convert::detail {

struct ListedFile {
  std::string rel;  // relative to the listed directory, '/'-separated
  std::string abs;
};

// Regular files under `dir` (recursively when `recursive`), sorted by `rel`. Entries whose
// status fails go to `bad`; hidden entries are skipped; directory symlinks are not followed;
// the directory `excluded` (SourcePlan::excluded; "" for none) is never entered.
Status ListFiles(const std::string& dir, bool recursive, std::vector<ListedFile>* files, std::vector<BadEntry>* bad,
                 const std::string& excluded);

// Sorted names of the non-hidden subdirectories of `dir`, other than `excluded`. Directory
// symlinks are not followed: their names go to `links` (when non-null), not to the result.
Result<std::vector<std::string>> ListSubdirs(const std::string& dir, const std::string& excluded,
                                             std::vector<std::string>* links = nullptr);

// Parses CSV text (RFC 4180 quoting) into rows of fields. `path` names the file in errors.
Result<std::vector<std::vector<std::string>>> ParseCsv(const std::string& text, const std::string& path);
Result<std::string> ReadTextFile(const std::string& path);

bool ParseInt(const std::string& s, int64_t* v);
bool ParseDouble(const std::string& s, double* v);

// Names are stored as UTF-8, which JSON output, Python's str and checkpoints need.
// InvalidArgument naming a class `name` read from `where` that is not (its bytes shown as \xHH).
Status CheckClassName(const std::string& where, const std::string& name);
// Checks every class name of `plan`; a case whose name (stored as its `path`) or split is
// not UTF-8 becomes a bad entry, failed or skipped as --on-error says.
Status RequireUtf8Names(const std::string& src, SourcePlan* plan);
// "1.5 MiB", "312 B".
std::string HumanBytes(uint64_t b);

// The planners, one per layout (kLayouts in layouts.cpp): each enumerates `src` into
// `plan` (whose layout, root and excluded are set). `class_names` is --classes: a layout
// whose row says names_labels checks it against its labels and sets plan->classes; the
// others never get a non-empty one.
Status PlanFolder(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan);
Status PlanCsv(const std::string& csv, const std::vector<std::string>& class_names, SourcePlan* plan);
Status PlanPairs(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan);
Status PlanRle(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan);
Status PlanNnunet(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan);
Status PlanNifti(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan);
Status PlanIdx(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan);

// What layout detection sees of a source directory: each listing is read once, when a
// layout's detect first asks for it.
class SourceDir {
 public:
  SourceDir(std::string dir, std::string excluded) : dir_(std::move(dir)), excluded_(std::move(excluded)) {}
  // Whether the directory has an entry `name` (file or directory).
  bool Has(const char* name) const;
  // Whether one of its regular files (not recursive) has a name that passes `test`.
  Result<bool> AnyFile(bool (*test)(const std::string& name));
  // Whether it has a subdirectory (not hidden, not a link, not the excluded one).
  Result<bool> HasSubdirs();

 private:
  std::string dir_, excluded_;
  std::optional<std::vector<ListedFile>> files_;
};

// One source layout. Adding a layout is a Layout value, a row of kLayouts, its planner
// (with a CaseSource beside it where the layout supplies pixels itself) and its test.
struct LayoutSpec {
  Layout layout;
  const char* name;         // --layout value, the provenance's "layout"
  const char* help;         // its line in shardify --help: what SRC holds
  const char* file_suffix;  // SRC is a file with this suffix, in the root directory; nullptr: SRC is the root
  // Directory layouts: whether SRC looks like this layout. Detection asks them by
  // ascending detect_rank (the more specific first) and takes the first yes.
  Result<bool> (*detect)(SourceDir& src);
  int detect_rank;
  const char* detect_hint;  // what detect looks for, e.g. "dataset.json" (for "cannot tell")
  bool names_labels;        // --classes names its integer labels (elsewhere --classes is an error)
  Status (*plan)(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan);
};

// The row of `layout`; nullptr for kAuto.
const LayoutSpec* FindLayout(Layout layout);

}  // namespace shardify::convert::detail
