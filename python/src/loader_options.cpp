// The table of `_core.Loader`'s keyword arguments (see loader_options.h).
#include "python/src/loader_options.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace shardify::python {
namespace {

// One keyword: where its value goes, and how to read it back (for the defaults).
struct LoaderOption {
  std::string name;
  std::string doc;
  std::function<void(PyLoaderOptions&, py::handle)> set;
  std::function<py::object(PyLoaderOptions&)> get;
};

// The patch options, engaged on first use; ParseLoaderOptions disengages them again when no
// patch size was given.
PatchOptions& Patch(PyLoaderOptions& o) {
  if (!o.loader.patch) o.loader.patch.emplace();
  return *o.loader.patch;
}

// The augmentation options, engaged on first use; ParseLoaderOptions disengages them again
// unless augment_nnunet is true.
LoaderOptions::Augment& Augment(PyLoaderOptions& o) {
  if (!o.loader.augment) o.loader.augment.emplace();
  return *o.loader.augment;
}

template <typename T>
const char* Expected() {
  if constexpr (std::is_same_v<T, bool>) return "a bool";
  if constexpr (std::is_floating_point_v<T>) return "a float";
  if constexpr (std::is_unsigned_v<T>) return "a non-negative int";
  if constexpr (std::is_integral_v<T>) return "an int";
  if constexpr (std::is_same_v<T, std::string>) return "a str";
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return "a list of str";
  if constexpr (std::is_same_v<T, Shape>) return "a list of int";
  if constexpr (std::is_same_v<T, std::pair<uint64_t, uint64_t>>) return "None or (epoch, step)";
  if constexpr (std::is_same_v<T, std::optional<int64_t>>) return "None or an int";
  if constexpr (std::is_same_v<T, std::optional<std::vector<int64_t>>>) return "None or a list of int";
  return "another type";
}

template <typename T>
T Cast(const std::string& name, py::handle value) {
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error("Loader option " + name + " takes " + Expected<T>() + ", got " +
                         py::str(py::repr(value)).cast<std::string>());
  }
}

// A keyword stored as it is: `at` gives the address of its place in the options.
template <typename At>
LoaderOption Member(std::string name, std::string doc, At at) {
  using T = std::remove_pointer_t<decltype(at(std::declval<PyLoaderOptions&>()))>;
  auto set = [at, name](PyLoaderOptions& o, py::handle v) { *at(o) = Cast<T>(name, v); };
  auto get = [at](PyLoaderOptions& o) { return py::cast(*at(o)); };
  return {std::move(name), std::move(doc), set, get};
}

void SetOrder(PyLoaderOptions& o, py::handle value) { o.loader.sampler.order = OrderNamed(value); }

void SetResume(PyLoaderOptions& o, py::handle value) {
  if (value.is_none()) {
    o.loader.sampler.resume.reset();
    return;
  }
  const auto [epoch, step] = Cast<std::pair<uint64_t, uint64_t>>("resume", value);
  o.loader.sampler.resume = SamplerState{epoch, step};
}

void SetAugmentP(PyLoaderOptions& o, py::handle value) {
  const auto spec = Cast<std::string>("augment_p", value);
  NnUnetAugmentOptions& n = Augment(o).nnunet;
  n.probability = NnUnetAugmentOptions().probability;
  if (!spec.empty()) Check(ParseAugProbabilities(spec, &n));
}

void SetMaskMode(PyLoaderOptions& o, py::handle value) {
  Augment(o).nnunet.mask_mode = Unwrap(ParseMaskMode(Cast<std::string>("augment_mask_mode", value)));
}

py::object GetResume(PyLoaderOptions& o) {
  const std::optional<SamplerState>& r = o.loader.sampler.resume;
  return r ? py::object(py::make_tuple(r->epoch, r->step)) : py::object(py::none());
}

// Every keyword of `_core.Loader`. The other fields of LoaderOptions follow from these or
// from the binding: the Open(dir)-only ones (verify_checksums, max_open_shards, io, remote)
// belong to the `_core.Dataset` the Loader reads; stage_to_device and device follow
// cuda_device; grow_ring is always on; the patch draws use `seed`.
const std::vector<LoaderOption>& Table() {
  using O = PyLoaderOptions;
  static const std::vector<LoaderOption> table = {
      Member("split", "the split to read", [](O& o) { return &o.loader.split; }),
      Member("batch_size", "samples per batch", [](O& o) { return &o.loader.batch_size; }),
      {"order", "one of " + SampleOrderNames(), SetOrder,
       [](O& o) { return py::cast(SampleOrderName(o.loader.sampler.order)); }},
      Member("seed", "seed of the order and of the patch draws", [](O& o) { return &o.loader.sampler.seed; }),
      Member("drop_last", "drop each rank's partial last batch", [](O& o) { return &o.loader.sampler.drop_last; }),
      Member("rank", "this process's rank", [](O& o) { return &o.loader.sampler.rank; }),
      Member("world_size", "processes sharing each epoch", [](O& o) { return &o.loader.sampler.world_size; }),
      Member("threads", "decode threads; 0: all cores", [](O& o) { return &o.loader.threads; }),
      Member("prefetch", "batches decoded ahead of the consumer (>= 1)", [](O& o) { return &o.loader.prefetch; }),
      Member("fields", "fields to load; empty: all (with a patch: the patch fields)",
             [](O& o) { return &o.loader.fields; }),
      Member("cuda_device", "-1, or the CUDA device each batch is also copied to",
             [](O& o) { return &o.binding.cuda_device; }),
      Member("patch", "patch size per spatial axis; empty: whole samples", [](O& o) { return &Patch(o).patch; }),
      Member("repeats", "passes over the split per epoch", [](O& o) { return &o.loader.sampler.repeats; }),
      Member("window_shards", "shards mixed together by shard_windowed",
             [](O& o) { return &o.loader.sampler.window_shards; }),
      Member("patch_image", "the field patches are drawn from", [](O& o) { return &Patch(o).image_field; }),
      Member("patch_label", "the label field cut with it; empty: images only",
             [](O& o) { return &Patch(o).label_field; }),
      Member("patch_margin", "empty, or voxels read on each side of the patch, per axis",
             [](O& o) { return &Patch(o).margin; }),
      Member("foreground_fraction", "share of each batch centred on foreground",
             [](O& o) { return &Patch(o).foreground_fraction; }),
      Member("label_pad", "label value outside the volume", [](O& o) { return &Patch(o).label_pad; }),
      Member("pin_memory", "pinned host buffers when a CUDA device answers", [](O& o) { return &o.loader.pin_memory; }),
      Member("epochs", "epochs in the run", [](O& o) { return &o.loader.sampler.epochs; }),
      {"resume", "(epoch, step) of the first batch, or None: (0, 0)", SetResume, GetResume},
      Member("augment_nnunet", "nnU-Net's augmentation of each patch in the decode threads",
             [](O& o) { return &o.binding.augment; }),
      {"augment_p", "its probabilities, as shardtrain --aug-p; empty: nnU-Net's", SetAugmentP,
       [](O&) { return py::cast(std::string()); }},
      Member("augment_seed", "the seed of its draws", [](O& o) { return &Augment(o).nnunet.seed; }),
      Member("augment_image_pad", "image value outside the input of a rotation",
             [](O& o) { return &Augment(o).nnunet.image_pad; }),
      {"augment_mask_mode", "how rotated masks are resampled: linear or nearest", SetMaskMode,
       [](O& o) { return py::cast(std::string(MaskModeName(Augment(o).nnunet.mask_mode))); }},
      Member("augment_ignore_label", "None, or what voxels outside the labelled data become (else 0)",
             [](O& o) { return &Augment(o).nnunet.ignore_label; }),
      Member("augment_mask_image_channels", "None (the dataset's), or the image channels masked outside the labels",
             [](O& o) { return &Augment(o).nnunet.mask_image_channels; }),
  };
  return table;
}

const LoaderOption* Find(const std::string& name) {
  for (const LoaderOption& option : Table()) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

std::string Names() {
  std::string out;
  for (const LoaderOption& option : Table()) out += (out.empty() ? "" : ", ") + option.name;
  return out;
}

}  // namespace

SampleOrder OrderNamed(py::handle name) {
  const auto text = Cast<std::string>("order", name);
  const std::optional<SampleOrder> order = ParseSampleOrder(text);
  if (!order) Throw(InvalidArgument("order must be one of " + SampleOrderNames() + ", got '" + text + "'"));
  return *order;
}

PyLoaderOptions ParseLoaderOptions(const py::kwargs& kwargs) {
  PyLoaderOptions o;
  for (const auto& [key, value] : kwargs) {
    const auto name = key.cast<std::string>();
    const LoaderOption* option = Find(name);
    if (option == nullptr) throw py::type_error("unknown Loader option " + name + "; the options are " + Names());
    option->set(o, value);
  }
  if (o.loader.patch && o.loader.patch->patch.empty()) o.loader.patch.reset();  // whole samples
  if (o.loader.patch) o.loader.patch->seed = o.loader.sampler.seed;
  if (!o.binding.augment) o.loader.augment.reset();
  o.loader.stage_to_device = o.binding.cuda_device >= 0;
  o.loader.device = o.loader.stage_to_device ? o.binding.cuda_device : 0;
  o.loader.grow_ring = true;  // a Python user may keep any number of batches alive
  return o;
}

py::list LoaderOptionTable() {
  PyLoaderOptions defaults;
  py::list out;
  for (const LoaderOption& option : Table()) out.append(py::make_tuple(option.name, option.get(defaults), option.doc));
  return out;
}

std::string LoaderOptionDocs() {
  PyLoaderOptions defaults;
  std::string out;
  for (const LoaderOption& option : Table()) {
    out += "  " + option.name + " (" + py::str(py::repr(option.get(defaults))).cast<std::string>() +
           "): " + option.doc + "\n";
  }
  return out;
}

}  // namespace shardify::python
