// The table of source layouts, and what is derived from it: names, --help lines,
// detection and PlanSource.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/file.h"
#include "base/strings.h"
#include "convert/decode/idx.h"
#include "convert/decode/image_io.h"
#include "convert/sources/source.h"
#include "convert/sources/source_internal.h"

namespace fs = std::filesystem;

namespace shardify::convert {
namespace detail {
namespace {

bool IsNifti(const std::string& name) { return KindFromName(name) == ImageKind::kNifti; }

Result<bool> LooksLikeFolder(SourceDir& d) { return d.HasSubdirs(); }
Result<bool> LooksLikePairs(SourceDir& d) { return d.Has("images") && d.Has("masks"); }
Result<bool> LooksLikeRle(SourceDir& d) { return d.Has("train.csv") && d.Has("train"); }
Result<bool> LooksLikeNnunet(SourceDir& d) { return d.Has("dataset.json") && d.Has("imagesTr"); }
Result<bool> LooksLikeNifti(SourceDir& d) { return d.AnyFile(&IsNifti); }
Result<bool> LooksLikeIdx(SourceDir& d) { return d.AnyFile(&IsIdxName); }

// In the order of shardify --help and of --layout's values. Columns: layout, name, help,
// file suffix, detect, detect rank, detect hint, names labels, planner (LayoutSpec).
constexpr LayoutSpec kLayouts[] = {
    {Layout::kFolder, "folder", "SRC/<class>/<image>: labels from the sorted class folder names", nullptr,
     &LooksLikeFolder, 6, "class folders", false, &PlanFolder},
    {Layout::kCsv, "csv", "SRC is a .csv with columns image[,label,mask,split,...]; paths relative to it", ".csv",
     nullptr, 0, nullptr, true, &PlanCsv},
    {Layout::kPairs, "pairs", "SRC/images/ and SRC/masks/ with matching file names", nullptr, &LooksLikePairs, 3,
     "images/+masks/", false, &PlanPairs},
    {Layout::kRle, "rle", "SRC/train.csv (id,class,segmentation) and SRC/train/caseN/caseN_dayM/scans/*.png", nullptr,
     &LooksLikeRle, 2, "train.csv", false, &PlanRle},
    {Layout::kNnunet, "nnunet", "SRC/dataset.json, imagesTr/<case>_XXXX.nii.gz, labelsTr/<case>.nii.gz, imagesTs/",
     nullptr, &LooksLikeNnunet, 1, "dataset.json", false, &PlanNnunet},
    {Layout::kNifti, "nifti", "a folder of .nii / .nii.gz volumes", nullptr, &LooksLikeNifti, 5, "volumes", false,
     &PlanNifti},
    {Layout::kIdx, "idx", "MNIST-style *-images-idx3-ubyte[.gz] with *-labels-idx1-ubyte[.gz]", nullptr, &LooksLikeIdx,
     4, "idx files", true, &PlanIdx},
};

// "a, b or c" (`last` = "or").
std::string Join(const std::vector<std::string>& items, const std::string& last) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == items.size() ? " " + last + " " : ", ") + items[i];
  }
  return s;
}

}  // namespace

const LayoutSpec* FindLayout(Layout layout) {
  for (const LayoutSpec& l : kLayouts) {
    if (l.layout == layout) return &l;
  }
  return nullptr;
}

bool SourceDir::Has(const char* name) const {
  std::error_code ec;
  return fs::exists(JoinPath(dir_, name), ec);
}

Result<bool> SourceDir::AnyFile(bool (*test)(const std::string& name)) {
  if (!files_) {
    std::vector<ListedFile> files;
    std::vector<BadEntry> bad;
    RETURN_IF_ERROR(ListFiles(dir_, false, &files, &bad, excluded_));
    files_ = std::move(files);
  }
  return std::any_of(files_->begin(), files_->end(), [&](const ListedFile& f) { return test(f.rel); });
}

Result<bool> SourceDir::HasSubdirs() {
  ASSIGN_OR_RETURN(const std::vector<std::string> dirs, ListSubdirs(dir_, excluded_));
  return !dirs.empty();
}

}  // namespace detail

using detail::kLayouts;
using detail::LayoutSpec;

const char* LayoutName(Layout layout) {
  const LayoutSpec* l = detail::FindLayout(layout);
  return l != nullptr ? l->name : "auto";
}

std::optional<Layout> ParseLayout(const std::string& name) {
  if (name == "auto") return Layout::kAuto;
  for (const LayoutSpec& l : kLayouts) {
    if (name == l.name) return l.layout;
  }
  return std::nullopt;
}

std::string LayoutNames() {
  std::vector<std::string> names = {"auto"};
  for (const LayoutSpec& l : kLayouts) names.push_back(l.name);
  return detail::Join(names, "or");
}

std::string LayoutHelp() {
  std::string s;
  for (const LayoutSpec& l : kLayouts) {
    char name[16];
    std::snprintf(name, sizeof name, "  %-6s  ", l.name);
    s += name + std::string(l.help) + "\n";
  }
  return s;
}

Result<Layout> DetectLayout(const std::string& src, const std::string& excluded) {
  std::error_code ec;
  fs::file_status st = fs::status(src, ec);
  if (ec) return NotFound(src + ": cannot open source: " + ec.message());
  std::vector<std::string> suffixes, hints;
  std::vector<const LayoutSpec*> by_rank;
  for (const LayoutSpec& l : kLayouts) {
    if (l.file_suffix != nullptr) {
      if (fs::is_regular_file(st) && src.size() > std::strlen(l.file_suffix) && EndsWith(src, l.file_suffix))
        return l.layout;
      suffixes.push_back(std::string("a ") + l.file_suffix);
    } else {
      by_rank.push_back(&l);
      hints.push_back(l.detect_hint);
    }
  }
  if (fs::is_regular_file(st)) {
    return InvalidArgument(src + ": a source file must be " + detail::Join(suffixes, "or") +
                           "; otherwise give a directory");
  }
  if (!fs::is_directory(st)) return InvalidArgument(src + ": not a file or directory");
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [](const LayoutSpec* a, const LayoutSpec* b) { return a->detect_rank < b->detect_rank; });
  detail::SourceDir dir(src, excluded);
  for (const LayoutSpec* l : by_rank) {
    ASSIGN_OR_RETURN(const bool yes, l->detect(dir));
    if (yes) return l->layout;
  }
  return InvalidArgument(src + ": cannot tell the layout (no " + detail::Join(hints, "or") + "); use --layout");
}

Result<SourcePlan> PlanSource(const std::string& src, Layout layout, const std::vector<std::string>& class_names,
                              const std::string& excluded) {
  if (layout == Layout::kAuto) {
    ASSIGN_OR_RETURN(layout, DetectLayout(src, excluded));
  }
  const LayoutSpec* l = detail::FindLayout(layout);
  if (l == nullptr) return Internal("layout not resolved");
  if (!class_names.empty() && !l->names_labels) {
    std::vector<std::string> named;
    for (const LayoutSpec& k : kLayouts) {
      if (k.names_labels) named.push_back(k.name);
    }
    return InvalidArgument("--classes applies to the " + detail::Join(named, "and") + " layouts");
  }
  SourcePlan plan;
  plan.layout = layout;
  plan.excluded = excluded;
  plan.root = l->file_suffix != nullptr ? fs::path(src).parent_path().string() : src;
  RETURN_IF_ERROR(l->plan(src, class_names, &plan));
  RETURN_IF_ERROR(detail::RequireUtf8Names(src, &plan));
  return plan;
}

}  // namespace shardify::convert
