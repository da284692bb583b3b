// `_core.Loader`: the reader's Loader, its batches handed out without copying.
#include "reader/loader.h"

#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "python/src/dataset.h"
#include "python/src/loader_options.h"

namespace shardify::python {
namespace {

// How often a wait for a batch returns to Python to run signal handlers (Ctrl-C).
constexpr std::chrono::milliseconds kSignalPoll{50};

class PyLoader {
 public:
  PyLoader(const PyDataset& d, PyLoaderOptions o) : cuda_device_(o.binding.cuda_device), pid_(getpid()) {
    loader_ = Unwrap(WithoutGil([&] { return Loader::Open(d.dataset, std::move(o.loader)); }));
  }
  PyLoader(const PyLoader&) = delete;
  PyLoader& operator=(const PyLoader&) = delete;
  ~PyLoader() { AbandonInForkedChild(); }

  // The next batch as {name: convert(capsule)} (or numpy arrays when `convert` is None),
  // plus "index"; None at the end. `stream`: the cudaStream_t that waits for the staged
  // batch; `release_stream` (0: `stream`) the one whose work must be done before its
  // buffers are reused, recorded when the last of its arrays is freed (a helper thread
  // may transform on its own stream for a loop on another). `signed_views`: export
  // u16/u32 as i16/i32.
  py::object Next(const py::object& convert, uintptr_t stream, bool signed_views, uintptr_t release_stream) {
    Loader& loader = Open();
    while (!WithoutGil([&] { return loader.WaitForNext(kSignalPoll); })) {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    std::shared_ptr<Batch> batch = Unwrap(WithoutGil([&] { return loader.Next(); }));
    if (!batch) return py::none();
    if (cuda_device_ >= 0 && stream != 0) {
      Check(StreamWaitForBatch(*batch, reinterpret_cast<void*>(stream)));
      batch->consumer_stream = reinterpret_cast<void*>(release_stream != 0 ? release_stream : stream);
    }
    return Export(batch, convert, signed_views);
  }

  // Stops the decode threads now (batches already handed out stay valid).
  void Close() {
    if (AbandonInForkedChild()) return;
    WithoutGil([&] {
      loader_.reset();
      return 0;
    });
  }

  py::tuple State() const {
    const SamplerState s = Open().State();
    return py::make_tuple(s.epoch, s.step);
  }
  uint64_t batches_per_epoch() const { return Open().batches_per_epoch(); }
  size_t ring_bytes() const { return loader_ ? loader_->ring_bytes() : 0; }

 private:
  Loader& Open() const {
    if (getpid() != pid_) {
      Throw(Unsupported("the Loader was opened by process " + std::to_string(pid_) +
                        "; a forked child cannot use it (create one in the child)"));
    }
    if (!loader_) Throw(InvalidArgument("the Loader is closed"));
    return *loader_;
  }

  // In a forked child (another pid) the decode threads exist only in the parent, and the
  // child's copy of the ring's lock may have been taken by one of them at the fork:
  // stopping them would wait forever or fail. So the child leaks its copy of the loader
  // on purpose (its memory goes with the process). True when it did.
  bool AbandonInForkedChild() {
    if (getpid() == pid_) return false;
    static_cast<void>(loader_.release());
    return true;
  }

  py::object Array(ArrayRef ref, const py::object& convert) const {
    if (convert.is_none()) return ToNumpy(std::move(ref));
    return convert(ToDlpack(std::move(ref)));
  }

  py::dict Export(const std::shared_ptr<Batch>& batch, const py::object& convert, bool signed_views) const {
    py::dict out;
    const int64_t n = static_cast<int64_t>(batch->size());
    for (const BatchField& f : batch->fields) {
      ArrayRef ref;
      ref.data = cuda_device_ >= 0 && f.device_data != nullptr ? f.device_data : f.data;
      ref.cuda_device = ref.data == f.device_data && f.device_data != nullptr ? cuda_device_ : -1;
      ref.dtype = f.dtype;
      ref.shape = f.shape;
      ref.owner = batch;
      ref.signed_view = signed_views;
      out[py::str(f.name)] = Array(std::move(ref), convert);
      const bool varies = std::any_of(f.sample_shapes.begin(), f.sample_shapes.end(), [&](const Shape& s) {
        return s.size() + 1 != f.shape.size() || !std::equal(s.begin(), s.end(), f.shape.begin() + 1);
      });
      if (f.kind == FieldKind::kNdarray && varies) out[py::str(f.name + ".shape")] = SampleShapes(f, convert);
    }
    ArrayRef index;
    index.data = batch->indices.data();
    index.dtype = DType::kI64;  // sample indices are far below 2^63
    index.shape = {n};
    index.owner = batch;
    out["index"] = Array(std::move(index), convert);
    return out;
  }

  // Each sample's own shape, [B, rank] int64, for fields padded to the batch maximum.
  py::object SampleShapes(const BatchField& f, const py::object& convert) const {
    auto shapes = std::make_shared<std::vector<int64_t>>();
    for (const Shape& s : f.sample_shapes) shapes->insert(shapes->end(), s.begin(), s.end());
    ArrayRef ref;
    ref.data = shapes->data();
    ref.dtype = DType::kI64;
    ref.shape = {static_cast<int64_t>(f.sample_shapes.size()), static_cast<int64_t>(f.shape.size()) - 1};
    ref.owner = shapes;
    return Array(std::move(ref), convert);
  }

  std::unique_ptr<Loader> loader_;
  int cuda_device_ = -1;
  pid_t pid_;  // the process that opened the loader
};

}  // namespace

void RegisterLoader(py::module_& m) {
  const std::string init_doc =
      "Opens the Loader over `dataset` (a _core.Dataset) with these keyword options:\n" + LoaderOptionDocs();
  py::class_<PyLoader>(m, "Loader")
      .def(py::init([](const PyDataset& d, const py::kwargs& options) {
             return std::make_unique<PyLoader>(d, ParseLoaderOptions(options));
           }),
           py::arg("dataset"), init_doc.c_str())
      .def("next", &PyLoader::Next, py::arg("convert"), py::arg("stream") = 0, py::arg("signed_views") = false,
           py::arg("release_stream") = 0)
      .def("close", &PyLoader::Close)
      .def("state", &PyLoader::State)
      .def_property_readonly("batches_per_epoch", &PyLoader::batches_per_epoch)
      .def_property_readonly("ring_bytes", &PyLoader::ring_bytes);
  m.def("loader_options", &LoaderOptionTable, "The Loader's keyword options as [(name, default, doc)].");
  const std::string order_doc = "The name of the sample order called `name`: one of " + SampleOrderNames() +
                                "; the aliases windowed and balanced give the last two.";
  m.def(
      "sample_order", [](py::handle name) { return std::string(SampleOrderName(OrderNamed(name))); }, py::arg("name"),
      order_doc.c_str());
  m.def("cuda_available", &CudaDeviceAvailable, "True when this build has the CUDA runtime and a CUDA device answers.");
}

}  // namespace shardify::python
