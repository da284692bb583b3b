// Source layouts: enumerate a dataset on disk into an ordered list of cases.
//
// Enumeration is deterministic: directory entries are sorted byte-wise by their path
// relative to the source root. Hidden entries (".name") are ignored; files without an
// image extension are counted in `ignored_files`; directory symlinks are not followed
// (so symlink loops cannot recurse); an entry whose status cannot be read (for example
// a symlink loop) becomes a `bad` entry that the pipeline fails or skips on.
// No pixels are decoded here (idx arrays are read whole, they are the source).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "convert/decode/image_io.h"

namespace shardify::convert {

enum class Layout { kAuto, kFolder, kCsv, kPairs, kRle, kNnunet, kNifti, kIdx };

// Each layout is a row of one table (kLayouts in layouts.cpp): its name, --help line,
// detection and planner; these are read from it.
const char* LayoutName(Layout layout);  // "folder", "csv", ...; "auto" for kAuto
std::optional<Layout> ParseLayout(const std::string& name);
std::string LayoutNames();  // "auto, folder, csv, ... or idx": the values of --layout
std::string LayoutHelp();   // one line per layout, "  folder  SRC/<class>/<image>: ...\n"

// Pixels that a layout supplies itself instead of through a case's files: an item of an
// idx array, masks decoded from run-length strings. Each layout's implementation lives
// beside its planner, which attaches one to each case (CaseInput::source); InspectCase and
// DecodeCase (case.h) ask it. Immutable once built and shared by copies of the case, so
// every method may be called from any number of threads at once. Errors are returned.
class CaseSource {
 public:
  virtual ~CaseSource() = default;

  // Whether it supplies the image (the case then has no image files) and the mask (the
  // case then has no mask file). What it does not supply comes from the case's files.
  virtual bool supplies_image() const { return false; }
  virtual bool supplies_mask() const { return false; }

  // When supplies_image(): the image's header, and its header and pixels.
  virtual Result<ImageInfo> InspectImage() const;
  virtual Result<DecodedImage> DecodeImage() const;

  // When supplies_mask(): the mask's header, and its header and pixels, over `image` (the
  // case's image, already read), whose geometry it may complete (an rle file name gives
  // the pixel spacing). `where` names the case in errors.
  virtual Result<ImageInfo> InspectMask(ImageInfo* image) const;
  virtual Result<DecodedImage> DecodeMask(ImageInfo* image, const std::string& where) const;
};

// One sample to produce.
struct CaseInput {
  std::string name;                 // path relative to the root, or case id (for messages)
  std::vector<std::string> images;  // image files (several = channels, stacked in order)
  std::string mask;                 // mask file; empty when none
  int64_t label = -1;
  std::string split;                         // empty: assigned from --split (or "train")
  std::vector<std::string> scalars;          // csv: values of SourcePlan::scalar_columns
  std::shared_ptr<const CaseSource> source;  // pixels of the layout's own; null: files only
};

// Whether the case has a mask: a mask file, or one its source supplies.
bool HasMask(const CaseInput& c);

struct BadEntry {
  std::string path;
  std::string reason;
};

struct SourcePlan {
  Layout layout = Layout::kAuto;
  std::string root;  // directory paths are relative to
  std::vector<CaseInput> cases;
  std::vector<std::string> classes;         // label i is classes[i]
  std::vector<std::string> scalar_columns;  // csv extra columns
  bool has_mask = false;                    // every case has a mask (HasMask)
  bool unlabeled_masks = false;             // some cases (nnU-Net imagesTs) have no mask
  std::string mask_labels_json;             // mask meta "labels"
  // nnunet: every value that dataset.json's labels declare (the values of regions and
  // "ignore" included), sorted; masks are checked against them before anything is
  // written. Empty: none declared, nothing to check.
  std::vector<int64_t> declared_mask_values;
  bool multi_label_mask = false;          // mask meta "multi_label": one channel per class
  std::string channel_names_json;         // image meta "channel_names"
  std::vector<std::string> shared_files;  // files many cases read (idx arrays): counted once in bytes_in
  std::vector<BadEntry> bad;              // entries that could not become cases
  std::vector<std::string> warnings;      // e.g. empty class folders
  uint64_t ignored_files = 0;
  std::string excluded;  // a directory never read as input ("" none)
};

// Picks a layout for `src` (a directory or a .csv file) or says why none fits. The
// directory `excluded` ("" for none) is not looked at.
Result<Layout> DetectLayout(const std::string& src, const std::string& excluded = "");

// Enumerates `src` in `layout` (kAuto detects). `class_names`, when non-empty, names
// integer labels (idx, csv with numeric labels) and must cover every label. `excluded`
// is a directory never enumerated, however its path is spelled: the destination, which
// may lie inside the source (it would otherwise become a class folder or add inputs).
Result<SourcePlan> PlanSource(const std::string& src, Layout layout, const std::vector<std::string>& class_names,
                              const std::string& excluded = "");

}  // namespace shardify::convert
