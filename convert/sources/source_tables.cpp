// The csv, nnunet and rle planners (layouts described by a table or a JSON file), and the
// rle layout's CaseSource (masks decoded from run-length strings).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "base/file.h"
#include "convert/decode/image_io.h"
#include "convert/sources/case.h"
#include "convert/sources/source.h"
#include "convert/sources/source_internal.h"

namespace fs = std::filesystem;

namespace shardify::convert {
namespace {

std::string Resolve(const std::string& root, const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  return JoinPath(root, p);
}

int Column(const std::vector<std::string>& header, const char* name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

// Labels as integers when every non-empty value is one; else class names, sorted.
Status CsvLabels(const std::vector<std::vector<std::string>>& rows, int col, const std::vector<std::string>& names,
                 const std::string& csv, std::vector<int64_t>* labels, std::vector<std::string>* classes) {
  bool numeric = true;
  std::set<std::string> distinct;
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() <= static_cast<size_t>(col) || rows[r][col].empty()) continue;
    int64_t v;
    numeric = numeric && detail::ParseInt(rows[r][col], &v);
    distinct.insert(rows[r][col]);
  }
  *classes = names;
  if (!numeric && names.empty()) classes->assign(distinct.begin(), distinct.end());
  labels->assign(rows.size(), -1);
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() <= static_cast<size_t>(col) || rows[r][col].empty()) continue;
    const std::string& v = rows[r][col];
    int64_t x = -1;
    if (numeric) {
      detail::ParseInt(v, &x);
      if (!names.empty() && (x < 0 || x >= static_cast<int64_t>(names.size()))) {
        return InvalidArgument(csv + ": line " + std::to_string(r + 1) + ": label " + v + " has no name in --classes");
      }
    } else {
      auto it = std::find(classes->begin(), classes->end(), v);
      if (it == classes->end())
        return InvalidArgument(csv + ": line " + std::to_string(r + 1) + ": label '" + v + "' is not in --classes");
      x = it - classes->begin();
    }
    (*labels)[r] = x;
  }
  return Status::Ok();
}

}  // namespace

namespace detail {

Status PlanCsv(const std::string& csv, const std::vector<std::string>& class_names, SourcePlan* plan) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(csv));
  ASSIGN_OR_RETURN(auto rows, ParseCsv(text, csv));
  if (rows.empty()) return Corruption(csv + ": empty csv (expected a header with an 'image' column)");
  const auto& header = rows[0];
  int image = Column(header, "image"), label = Column(header, "label");
  int mask = Column(header, "mask"), split = Column(header, "split");
  if (image < 0) return Corruption(csv + ": header has no 'image' column");
  std::vector<int> extra;
  for (size_t i = 0; i < header.size(); ++i) {
    int c = static_cast<int>(i);
    if (c != image && c != label && c != mask && c != split) {
      extra.push_back(c);
      plan->scalar_columns.push_back(header[i]);
    }
  }
  std::vector<int64_t> labels(rows.size(), -1);
  if (label >= 0) RETURN_IF_ERROR(CsvLabels(rows, label, class_names, csv, &labels, &plan->classes));
  plan->has_mask = mask >= 0;
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    std::string where = csv + ": line " + std::to_string(r + 1);
    if (row.size() != header.size()) {
      plan->bad.push_back(
          {where, "expected " + std::to_string(header.size()) + " columns, found " + std::to_string(row.size())});
      continue;
    }
    if (row[image].empty() || (mask >= 0 && row[mask].empty())) {
      plan->bad.push_back({where, "empty image or mask path"});
      continue;
    }
    CaseInput in;
    in.name = row[image];
    in.images = {Resolve(plan->root, row[image])};
    if (mask >= 0) in.mask = Resolve(plan->root, row[mask]);
    in.label = labels[r];
    if (split >= 0) in.split = row[split];
    for (int c : extra) in.scalars.push_back(row[c]);
    plan->cases.push_back(std::move(in));
  }
  return Status::Ok();
}

namespace {

struct NnunetCase {
  std::map<int, std::string> channels;  // channel number -> path
};

Status ListNnunetFolder(const std::string& dir, const std::string& ending, SourcePlan* plan,
                        std::map<std::string, NnunetCase>* cases) {
  std::vector<ListedFile> files;
  RETURN_IF_ERROR(ListFiles(dir, false, &files, &plan->bad, plan->excluded));
  for (const auto& f : files) {
    const std::string& n = f.rel;
    if (n.size() <= ending.size() + 5 || n.compare(n.size() - ending.size(), ending.size(), ending) != 0) {
      ++plan->ignored_files;
      continue;
    }
    std::string stem = n.substr(0, n.size() - ending.size());
    int64_t ch = -1;
    if (stem[stem.size() - 5] != '_' || !ParseInt(stem.substr(stem.size() - 4), &ch)) {
      plan->bad.push_back({f.abs, "name does not end in _XXXX" + ending + " (channel number)"});
      continue;
    }
    (*cases)[stem.substr(0, stem.size() - 5)].channels[static_cast<int>(ch)] = f.abs;
  }
  return Status::Ok();
}

void AddNnunetCases(const std::string& src, const std::string& folder, const std::string& ending, int channels,
                    bool labeled, SourcePlan* plan) {
  std::map<std::string, NnunetCase> cases;
  Status s = ListNnunetFolder(JoinPath(src, folder), ending, plan, &cases);
  if (!s.ok()) {
    plan->bad.push_back({JoinPath(src, folder), s.message()});
    return;
  }
  for (const auto& [name, c] : cases) {
    CaseInput in;
    in.name = folder + "/" + name;
    in.split = labeled ? "" : "test";
    std::string missing;
    for (int k = 0; k < channels; ++k) {
      auto it = c.channels.find(k);
      if (it == c.channels.end()) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(k);
        continue;
      }
      in.images.push_back(it->second);
    }
    if (!missing.empty() || static_cast<int>(c.channels.size()) != channels) {
      plan->bad.push_back({JoinPath(src, in.name), "case has channels " + std::to_string(c.channels.size()) +
                                                       " files but dataset.json names " + std::to_string(channels) +
                                                       (missing.empty() ? "" : " (missing channel " + missing + ")")});
      continue;
    }
    if (labeled) {
      in.mask = JoinPath(src, "labelsTr/" + name + ending);
      std::error_code ec;
      if (!fs::is_regular_file(in.mask, ec)) {
        plan->bad.push_back({JoinPath(src, in.name), "no label file labelsTr/" + name + ending});
        continue;
      }
    } else {
      plan->unlabeled_masks = true;
    }
    plan->cases.push_back(std::move(in));
  }
}

}  // namespace

namespace {

// Every integer that dataset.json's labels declare: a value, or a region's list of them
// (as nnU-Net's LabelManager reads them; a string holding an integer counts).
Status DeclaredLabels(const nlohmann::ordered_json& labels, const std::string& json_path, std::vector<int64_t>* out) {
  auto add = [&](const std::string& name, const nlohmann::ordered_json& v) {
    int64_t x = 0;
    if (v.is_number_integer()) {
      out->push_back(v.get<int64_t>());
    } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
               std::fabs(v.get<double>()) < 9e15) {
      out->push_back(static_cast<int64_t>(v.get<double>()));
    } else if (v.is_string() && ParseInt(v.get<std::string>(), &x)) {
      out->push_back(x);
    } else {
      return Corruption(json_path + ": label '" + name + "' is " + v.dump() + ", not an integer or a list of them");
    }
    return Status::Ok();
  };
  if (!labels.is_object()) return Corruption(json_path + ": 'labels' is not an object");
  for (const auto& [name, v] : labels.items()) {
    if (!v.is_array()) {
      RETURN_IF_ERROR(add(name, v));
      continue;
    }
    for (const auto& e : v) RETURN_IF_ERROR(add(name, e));
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return Status::Ok();
}

std::string JoinValues(const std::vector<int64_t>& v) {
  std::string out;
  for (int64_t x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

// nnU-Net's rule (LabelManager and verify_dataset_integrity): the values of every label
// but "ignore", regions' lists included, are 0 (background), 1, 2, ... without a gap, and
// "ignore", where declared, is one integer just above them. `labels` has passed
// DeclaredLabels.
Status CheckConsecutive(const nlohmann::ordered_json& labels, const std::string& json_path) {
  std::vector<int64_t> values;
  nlohmann::ordered_json rest = labels;
  rest.erase("ignore");
  RETURN_IF_ERROR(DeclaredLabels(rest, json_path, &values));
  std::vector<int64_t> missing, extra;
  const int64_t top = values.empty() ? 0 : std::max<int64_t>(values.back(), 0);
  for (int64_t v : values) {
    if (v < 0) extra.push_back(v);
  }
  for (int64_t v = 0; v <= top && missing.size() < 20; ++v) {
    if (!std::binary_search(values.begin(), values.end(), v)) missing.push_back(v);
  }
  std::string why;
  if (!missing.empty()) why += "; missing " + JoinValues(missing) + (missing[0] == 0 ? " (background)" : "");
  if (!extra.empty()) why += "; negative " + JoinValues(extra);
  if (labels.contains("ignore")) {
    const nlohmann::ordered_json& ignore = labels["ignore"];
    std::vector<int64_t> own;
    if (ignore.is_array() || !DeclaredLabels({{"ignore", ignore}}, json_path, &own).ok() || own[0] != top + 1) {
      why += "; 'ignore' is " + ignore.dump() +
             ", where nnU-Net takes one integer just above the labels: " + std::to_string(top + 1);
    }
  }
  if (why.empty()) return Status::Ok();
  return InvalidArgument(json_path + ": labels must be 0 (background), 1, 2, ... without gaps, as nnU-Net requires; " +
                         "they are " + (values.empty() ? "none" : JoinValues(values)) + why +
                         ". Renumber the masks and the labels");
}

// nnU-Net's region-based training: a label given as a list of values is a region, and
// then `regions_class_order` must say which value each foreground label is written back
// as, one entry per label other than background and ignore.
Status CheckRegions(const nlohmann::ordered_json& j, const std::string& json_path) {
  size_t labels = 0;
  std::string regions;
  for (const auto& [name, v] : j["labels"].items()) {
    if (name == "ignore" || (v.is_number_integer() && v.get<int64_t>() == 0)) continue;
    ++labels;
    if (v.is_array()) regions += (regions.empty() ? "'" : ", '") + name + "'";
  }
  if (regions.empty()) return Status::Ok();
  if (!j.contains("regions_class_order")) {
    return InvalidArgument(json_path + ": labels " + regions +
                           " are regions (lists of values), and then nnU-Net needs 'regions_class_order', one value "
                           "per foreground label (" +
                           std::to_string(labels) + "); it is missing");
  }
  const nlohmann::ordered_json& order = j["regions_class_order"];
  if (!order.is_array() || order.size() != labels ||
      !std::all_of(order.begin(), order.end(), [](const nlohmann::ordered_json& e) { return e.is_number_integer(); })) {
    return InvalidArgument(json_path + ": 'regions_class_order' is " + order.dump() + "; nnU-Net takes a list of " +
                           std::to_string(labels) + " integers, one per foreground label");
  }
  return Status::Ok();
}

}  // namespace

Status PlanNnunet(const std::string& src, const std::vector<std::string>&, SourcePlan* plan) {
  const std::string json_path = JoinPath(src, "dataset.json");
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(json_path));
  // Ordered, so that channel names and labels keep the order of dataset.json in the meta.
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corruption(json_path + ": not valid JSON");
  const nlohmann::ordered_json* names = j.contains("channel_names") ? &j["channel_names"]
                                        : j.contains("modality")    ? &j["modality"]
                                                                    : nullptr;
  if (names == nullptr || !names->is_object() || names->empty()) {
    return Corruption(json_path + ": missing 'channel_names' object");
  }
  std::string ending = ".nii.gz";
  if (j.contains("file_ending") && j["file_ending"].is_string()) ending = j["file_ending"].get<std::string>();
  if (KindFromName("x" + ending) != ImageKind::kNifti)
    return Unsupported(json_path + ": file_ending " + ending + " (only NIfTI)");
  plan->channel_names_json = names->dump();
  if (j.contains("labels")) {
    plan->mask_labels_json = j["labels"].dump();
    RETURN_IF_ERROR(DeclaredLabels(j["labels"], json_path, &plan->declared_mask_values));
    RETURN_IF_ERROR(CheckConsecutive(j["labels"], json_path));
    RETURN_IF_ERROR(CheckRegions(j, json_path));
  }
  plan->has_mask = true;
  const int channels = static_cast<int>(names->size());
  AddNnunetCases(src, "imagesTr", ending, channels, true, plan);
  std::error_code ec;
  if (fs::is_directory(JoinPath(src, "imagesTs"), ec)) AddNnunetCases(src, "imagesTs", ending, channels, false, plan);
  if (plan->cases.empty() && plan->bad.empty()) return NotFound(JoinPath(src, "imagesTr") + ": no cases found");
  return Status::Ok();
}

namespace {

// "slice_0012_266_266_1.50_1.50.png" -> slice number text and (sx, sy).
bool ParseSliceName(const std::string& n, std::string* slice, std::vector<double>* spacing) {
  if (n.rfind("slice_", 0) != 0 || KindFromName(n) != ImageKind::kPng) return false;
  std::vector<std::string> parts;
  std::string cur;
  for (char c : n.substr(0, n.size() - 4)) {
    if (c == '_') {
      parts.push_back(cur);
      cur.clear();
    } else
      cur += c;
  }
  parts.push_back(cur);
  if (parts.size() != 6) return false;
  double sx, sy;
  if (!ParseDouble(parts[4], &sx) || !ParseDouble(parts[5], &sy)) return false;
  *slice = parts[1];
  *spacing = {sx, sy};
  return true;
}

// The mask of one rle slice: a channel per class, decoded from its run-length string
// ("" for none) over the H x W pixels of the slice's image, whose geometry is the pixel
// spacing of its file name.
class RleMask final : public CaseSource {
 public:
  RleMask(std::vector<std::string> channels, std::vector<double> spacing)
      : channels_(std::move(channels)), spacing_(std::move(spacing)) {}

  bool supplies_mask() const override { return true; }

  Result<ImageInfo> InspectMask(ImageInfo* image) const override {
    image->geometry.spacing = spacing_;
    image->geometry.origin = {0.0, 0.0};
    image->geometry.direction = {1.0, 0.0, 0.0, 1.0};
    ImageInfo mask;
    mask.dtype = DType::kU8;
    mask.shape = {static_cast<int64_t>(channels_.size()), image->shape[1], image->shape[2]};
    return mask;
  }

  Result<DecodedImage> DecodeMask(ImageInfo* image, const std::string& where) const override {
    DecodedImage mask;
    ASSIGN_OR_RETURN(mask.info, InspectMask(image));
    const int64_t hw = image->shape[1] * image->shape[2];
    mask.pixels.assign(channels_.size() * static_cast<size_t>(hw), 0);
    for (size_t c = 0; c < channels_.size(); ++c) {
      RETURN_IF_ERROR(DecodeRle(channels_[c], &mask.pixels[c * hw], static_cast<uint64_t>(hw),
                                where + " (mask channel " + std::to_string(c) + ")"));
    }
    return mask;
  }

 private:
  std::vector<std::string> channels_;  // run-length strings, one per class
  std::vector<double> spacing_;        // (x, y)
};

}  // namespace

Status PlanRle(const std::string& src, const std::vector<std::string>&, SourcePlan* plan) {
  const std::string csv = JoinPath(src, "train.csv");
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(csv));
  ASSIGN_OR_RETURN(auto rows, ParseCsv(text, csv));
  if (rows.empty()) return Corruption(csv + ": empty csv");
  int id = Column(rows[0], "id"), cls = Column(rows[0], "class"), seg = Column(rows[0], "segmentation");
  if (id < 0 || cls < 0 || seg < 0) return Corruption(csv + ": header must have id, class, segmentation");
  std::set<std::string> classes;
  std::map<std::string, std::map<std::string, std::string>> rle;
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    if (row.size() < rows[0].size()) {
      if (row.size() == rows[0].size() - 1 && seg == static_cast<int>(rows[0].size()) - 1) {
        classes.insert(row[cls]);  // empty trailing segmentation
        continue;
      }
      return Corruption(csv + ": line " + std::to_string(r + 1) + ": too few columns");
    }
    classes.insert(row[cls]);
    if (!row[seg].empty()) rle[row[id]][row[cls]] = row[seg];
  }
  std::vector<ListedFile> files;
  RETURN_IF_ERROR(ListFiles(JoinPath(src, "train"), true, &files, &plan->bad, plan->excluded));
  nlohmann::json labels = nlohmann::json::object();
  int k = 0;
  for (const auto& c : classes) {
    RETURN_IF_ERROR(CheckClassName(csv, c));
    labels[c] = k++;
  }
  plan->mask_labels_json = labels.dump();
  plan->multi_label_mask = true;
  plan->has_mask = true;
  for (const auto& f : files) {
    fs::path rel(f.rel);
    std::string slice;
    std::vector<double> spacing;
    if (rel.parent_path().filename() != "scans" || !ParseSliceName(rel.filename().string(), &slice, &spacing)) {
      ++plan->ignored_files;
      continue;
    }
    CaseInput in;
    in.name = rel.parent_path().parent_path().filename().string() + "_slice_" + slice;
    in.images = {f.abs};
    auto it = rle.find(in.name);
    std::vector<std::string> channels;
    for (const auto& c : classes) {
      std::string s;
      if (it != rle.end() && it->second.count(c)) s = it->second.at(c);
      channels.push_back(s);
    }
    // A csv that names no class gives the slices no mask.
    if (!channels.empty()) in.source = std::make_shared<RleMask>(std::move(channels), std::move(spacing));
    plan->cases.push_back(std::move(in));
  }
  if (plan->cases.empty() && plan->bad.empty())
    return NotFound(JoinPath(src, "train") + ": no scans/slice_*.png files found");
  return Status::Ok();
}

}  // namespace detail
}  // namespace shardify::convert
