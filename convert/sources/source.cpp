// Listing helpers, the folder, pairs, nifti and idx planners, and the idx layout's
// CaseSource (items of an idx array).
#include "convert/sources/source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "base/file.h"
#include "base/strings.h"
#include "convert/decode/idx.h"
#include "convert/decode/image_io.h"
#include "convert/sources/source_internal.h"

namespace fs = std::filesystem;

namespace shardify::convert {
namespace detail {
namespace {

bool Hidden(const fs::path& p) {
  std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

// (device, inode) of the excluded directory, when it exists.
using DirKey = std::optional<std::pair<uint64_t, uint64_t>>;

DirKey KeyOf(const std::string& excluded) {
  struct stat st;
  if (excluded.empty() || ::stat(excluded.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

// Whether directory `p` (not a link) is the excluded one.
bool IsExcluded(const fs::path& p, const DirKey& key) {
  if (!key) return false;
  Result<std::pair<uint64_t, uint64_t>> id = FileId(p.string());
  return id.ok() && *id == *key;
}

Status ListInto(const fs::path& dir, const std::string& prefix, bool recursive, const DirKey& skip,
                std::vector<ListedFile>* files, std::vector<BadEntry>* bad) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return IOError(dir.string() + ": cannot list directory: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return IOError(dir.string() + ": cannot list directory: " + ec.message());
    const fs::path& p = it->path();
    if (Hidden(p)) continue;
    std::string rel = prefix + p.filename().string();
    std::error_code sec;
    // The entry's type comes from readdir without a stat; only links are resolved.
    const bool link = it->is_symlink(sec);
    fs::file_type type = fs::file_type::unknown;
    if (!sec)
      type = link ? fs::status(p, sec).type()
                  : (it->is_directory(sec)      ? fs::file_type::directory
                     : it->is_regular_file(sec) ? fs::file_type::regular
                                                : fs::file_type::unknown);
    if (sec) {
      bad->push_back({p.string(), "cannot stat: " + sec.message()});
      continue;
    }
    if (type == fs::file_type::directory) {
      if (!recursive || link || IsExcluded(p, skip)) continue;  // never follow directory links: no loops
      RETURN_IF_ERROR(ListInto(p, rel + "/", true, skip, files, bad));
    } else if (type == fs::file_type::regular) {
      files->push_back({rel, p.string()});
    }
  }
  return Status::Ok();
}

}  // namespace

Status ListFiles(const std::string& dir, bool recursive, std::vector<ListedFile>* files, std::vector<BadEntry>* bad,
                 const std::string& excluded) {
  RETURN_IF_ERROR(ListInto(fs::path(dir), "", recursive, KeyOf(excluded), files, bad));
  std::sort(files->begin(), files->end(), [](const ListedFile& a, const ListedFile& b) { return a.rel < b.rel; });
  std::sort(bad->begin(), bad->end(), [](const BadEntry& a, const BadEntry& b) { return a.path < b.path; });
  return Status::Ok();
}

Result<std::vector<std::string>> ListSubdirs(const std::string& dir, const std::string& excluded,
                                             std::vector<std::string>* links) {
  std::vector<std::string> out;
  const DirKey skip = KeyOf(excluded);
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return IOError(dir + ": cannot list directory: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return IOError(dir + ": cannot list directory: " + ec.message());
    std::error_code sec;
    if (Hidden(it->path()) || !fs::is_directory(it->path(), sec)) continue;
    if (it->is_symlink(sec)) {
      if (links != nullptr) links->push_back(it->path().filename().string());
    } else if (!IsExcluded(it->path(), skip)) {
      out.push_back(it->path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  if (links != nullptr) std::sort(links->begin(), links->end());
  return out;
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IOError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IOError(path + ": cannot read");
  return ss.str();
}

Result<std::vector<std::vector<std::string>>> ParseCsv(const std::string& text, const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"')
        quoted = false;
      else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      field.clear();
      row.clear();
      any = false;
      ++line;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) return Corruption(path + ": unterminated quoted field at line " + std::to_string(line));
  if (any || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

bool ParseInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *v = x;
  return true;
}

bool ParseDouble(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  double x = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  *v = x;
  return true;
}

Status CheckClassName(const std::string& where, const std::string& name) {
  if (IsUtf8(name)) return Status::Ok();
  return InvalidArgument(where + ": class name '" + EscapeNonUtf8(name) +
                         "' is not UTF-8 (shardify stores names as UTF-8); rename it");
}

Status RequireUtf8Names(const std::string& src, SourcePlan* plan) {
  for (const std::string& c : plan->classes) RETURN_IF_ERROR(CheckClassName(src, c));
  std::vector<CaseInput>& cases = plan->cases;
  const auto bad = std::stable_partition(cases.begin(), cases.end(),
                                         [](const CaseInput& in) { return IsUtf8(in.name) && IsUtf8(in.split); });
  for (auto in = bad; in != cases.end(); ++in) {
    const bool name = !IsUtf8(in->name);
    plan->bad.push_back({EscapeNonUtf8(JoinPath(plan->root, in->name)),
                         std::string(name ? "name" : "split '" + EscapeNonUtf8(in->split) + "'") +
                             " is not UTF-8 (shardify stores names as UTF-8); rename it"});
  }
  cases.erase(bad, cases.end());
  return Status::Ok();
}

namespace {

bool IsImage(const std::string& p) { return KindFromName(p) != ImageKind::kUnknown; }

}  // namespace

Status PlanFolder(const std::string& src, const std::vector<std::string>&, SourcePlan* plan) {
  std::vector<std::string> links;
  ASSIGN_OR_RETURN(plan->classes, ListSubdirs(src, plan->excluded, &links));
  for (const std::string& l : links) {
    plan->warnings.push_back(JoinPath(src, l) + ": a directory symlink, not followed (no class)");
  }
  if (plan->classes.empty()) return NotFound(src + ": no class folders found");
  for (size_t c = 0; c < plan->classes.size(); ++c) {
    const std::string& cls = plan->classes[c];
    std::vector<ListedFile> files;
    RETURN_IF_ERROR(ListFiles(JoinPath(src, cls), true, &files, &plan->bad, plan->excluded));
    size_t n = 0;
    for (const auto& f : files) {
      if (!IsImage(f.rel)) {
        ++plan->ignored_files;
        continue;
      }
      CaseInput in;
      in.name = cls + "/" + f.rel;
      in.images = {f.abs};
      in.label = static_cast<int64_t>(c);
      plan->cases.push_back(std::move(in));
      ++n;
    }
    if (n == 0)
      plan->warnings.push_back(JoinPath(src, cls) + ": class folder has no images (class kept, label " +
                               std::to_string(c) + ")");
  }
  return Status::Ok();
}

Status PlanNifti(const std::string& src, const std::vector<std::string>&, SourcePlan* plan) {
  std::vector<ListedFile> files;
  RETURN_IF_ERROR(ListFiles(src, true, &files, &plan->bad, plan->excluded));
  for (const auto& f : files) {
    if (KindFromName(f.rel) != ImageKind::kNifti) {
      ++plan->ignored_files;
      continue;
    }
    CaseInput in;
    in.name = f.rel;
    in.images = {f.abs};
    plan->cases.push_back(std::move(in));
  }
  if (plan->cases.empty()) return NotFound(src + ": no .nii or .nii.gz files found");
  return Status::Ok();
}

namespace {

std::string Stem(const std::string& rel) {
  std::string s = rel;
  if (s.size() > 7 && s.compare(s.size() - 7, 7, ".nii.gz") == 0) return s.substr(0, s.size() - 7);
  size_t dot = s.rfind('.'), slash = s.rfind('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) s.resize(dot);
  return s;
}

}  // namespace

Status PlanPairs(const std::string& src, const std::vector<std::string>&, SourcePlan* plan) {
  std::vector<ListedFile> images, masks;
  RETURN_IF_ERROR(ListFiles(JoinPath(src, "images"), true, &images, &plan->bad, plan->excluded));
  RETURN_IF_ERROR(ListFiles(JoinPath(src, "masks"), true, &masks, &plan->bad, plan->excluded));
  std::map<std::string, std::string> by_stem;
  for (const auto& m : masks) {
    if (IsImage(m.rel))
      by_stem[Stem(m.rel)] = m.abs;
    else
      ++plan->ignored_files;
  }
  plan->has_mask = true;
  for (const auto& f : images) {
    if (!IsImage(f.rel)) {
      ++plan->ignored_files;
      continue;
    }
    auto it = by_stem.find(Stem(f.rel));
    if (it == by_stem.end()) {
      plan->bad.push_back({f.abs, "no matching mask in " + JoinPath(src, "masks")});
      continue;
    }
    CaseInput in;
    in.name = "images/" + f.rel;
    in.images = {f.abs};
    in.mask = it->second;
    by_stem.erase(it);
    plan->cases.push_back(std::move(in));
  }
  for (const auto& [stem, path] : by_stem) plan->warnings.push_back(path + ": mask without an image (ignored)");
  if (plan->cases.empty() && plan->bad.empty()) return NotFound(JoinPath(src, "images") + ": no images found");
  return Status::Ok();
}

namespace {

std::string SplitForIdxPrefix(const std::string& prefix) {
  if (prefix.rfind("train", 0) == 0) return "train";
  if (prefix.rfind("t10k", 0) == 0 || prefix.rfind("test", 0) == 0) return "test";
  return prefix;
}

// One item of an idx images array, [N, H, W] or [N, H, W, C]: its image, [C, H, W]. The
// cases of one file share the array, which lives as long as the last of them.
class IdxItem final : public CaseSource {
 public:
  IdxItem(std::shared_ptr<const IdxArray> images, int64_t item) : images_(std::move(images)), item_(item) {}

  bool supplies_image() const override { return true; }

  Result<ImageInfo> InspectImage() const override {
    const IdxArray& a = *images_;
    ImageInfo info;
    info.dtype = a.dtype;
    info.shape = a.shape.size() == 4 ? Shape{a.shape[3], a.shape[1], a.shape[2]} : Shape{1, a.shape[1], a.shape[2]};
    return info;
  }

  Result<DecodedImage> DecodeImage() const override {
    const IdxArray& a = *images_;
    DecodedImage out;
    ASSIGN_OR_RETURN(out.info, InspectImage());
    const size_t es = DTypeSize(a.dtype);
    ASSIGN_OR_RETURN(uint64_t n, ByteSize(out.info.shape, out.info.dtype));
    const uint8_t* src = a.data.data() + static_cast<size_t>(item_) * n;
    if (a.shape.size() == 3) {
      out.pixels.assign(src, src + n);
      return out;
    }
    out.pixels.resize(n);  // [H, W, C] -> [C, H, W]
    const int64_t c = out.info.shape[0], hw = out.info.shape[1] * out.info.shape[2];
    for (int64_t p = 0; p < hw; ++p) {
      for (int64_t k = 0; k < c; ++k) std::memcpy(&out.pixels[(k * hw + p) * es], src + (p * c + k) * es, es);
    }
    return out;
  }

 private:
  std::shared_ptr<const IdxArray> images_;
  int64_t item_;
};

Status LoadIdxSet(const std::string& images, const std::string& labels, const std::string& split, SourcePlan* plan) {
  auto array = std::make_shared<IdxArray>();
  ASSIGN_OR_RETURN(*array, ReadIdx(images));
  ASSIGN_OR_RETURN(const IdxArray label_array, ReadIdx(labels));
  const Shape& s = array->shape;
  if (s.size() != 3 && s.size() != 4)
    return Unsupported(images + ": expected [N, H, W] or [N, H, W, C] images, got " + ShapeToString(s));
  if (label_array.shape.size() != 1 || label_array.shape[0] != s[0]) {
    return Corruption(labels + ": " + ShapeToString(label_array.shape) + " labels do not match " +
                      std::to_string(s[0]) + " images in " + images);
  }
  if (label_array.dtype != DType::kU8) return Unsupported(labels + ": labels must be unsigned bytes");
  const std::string base = fs::path(images).filename().string();
  for (int64_t i = 0; i < s[0]; ++i) {
    CaseInput in;
    in.name = base + "#" + std::to_string(i);
    in.source = std::make_shared<IdxItem>(array, i);
    in.label = label_array.data[static_cast<size_t>(i)];
    in.split = split;
    plan->cases.push_back(std::move(in));
  }
  plan->shared_files.push_back(images);
  plan->shared_files.push_back(labels);
  return Status::Ok();
}

}  // namespace

Status PlanIdx(const std::string& src, const std::vector<std::string>& class_names, SourcePlan* plan) {
  std::vector<ListedFile> files;
  RETURN_IF_ERROR(ListFiles(src, false, &files, &plan->bad, plan->excluded));
  std::map<std::string, std::string> labels;
  for (const auto& f : files) {
    size_t k = f.rel.find("-labels");
    if (IsIdxName(f.rel) && k != std::string::npos) labels[f.rel.substr(0, k)] = f.abs;
  }
  for (const auto& f : files) {
    size_t k = f.rel.find("-images");
    if (!IsIdxName(f.rel)) {
      ++plan->ignored_files;
      continue;
    }
    if (k == std::string::npos) continue;
    std::string prefix = f.rel.substr(0, k);
    auto it = labels.find(prefix);
    if (it == labels.end()) return NotFound(f.abs + ": no matching " + prefix + "-labels-idx1-ubyte file");
    RETURN_IF_ERROR(LoadIdxSet(f.abs, it->second, SplitForIdxPrefix(prefix), plan));
  }
  if (plan->shared_files.empty()) return NotFound(src + ": no *-images-idx3-ubyte files found");
  if (class_names.empty()) return Status::Ok();
  for (const auto& c : plan->cases) {
    if (c.label >= static_cast<int64_t>(class_names.size())) {
      return InvalidArgument(c.name + ": label " + std::to_string(c.label) + " has no name in --classes (" +
                             std::to_string(class_names.size()) + " given)");
    }
  }
  plan->classes = class_names;
  return Status::Ok();
}

}  // namespace detail
}  // namespace shardify::convert
