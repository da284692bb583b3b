// `_core.Dataset`: random access to the samples of a shard dataset, as numpy and Python values.
#include "python/src/dataset.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "base/strings.h"
#include "format/manifest_dict.h"

namespace shardify::python {
namespace {

// One decoder per Python thread that reads samples (a Decoder is per-thread state).
Decoder& ThreadDecoder() {
  thread_local Decoder decoder;
  return decoder;
}

py::object ShapeTuple(const Shape& shape) {
  py::list out;
  for (int64_t d : shape) {
    if (d < 0) {
      out.append(py::none());
    } else {
      out.append(d);
    }
  }
  return py::tuple(out);
}

// Text from the manifest as a str: well-formed UTF-8 as it is, any other byte as Python's
// surrogateescape decodes it (os.fsencode gives the bytes back), as shardtool's JSON does. A
// source path from a Latin-1 file system then neither fails nor loses its bytes.
py::str Text(const std::string& s) {
  PyObject* text = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (text == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

py::dict MetaDict(const std::vector<KeyValue>& kv) {
  py::dict out;
  for (const KeyValue& e : kv) out[Text(e.key)] = Text(e.value);
  return out;
}

// A FieldStats or the Provenance as the dict format/manifest_dict.h names; text as Text().
template <typename Record>
py::dict MembersDict(const Record& r) {
  py::dict out;
  ForEachMember(r, [&out](const char* name, const auto& value) {
    using Value = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<Value, std::vector<KeyValue>>) {
      out[name] = MetaDict(value);
    } else if constexpr (std::is_same_v<Value, std::string>) {
      out[name] = Text(value);
    } else {
      out[name] = value;
    }
  });
  return out;
}

// Unlike `shardtool info --json`'s fields, a scalar field's dtype and a variable extent
// are None, shapes are tuples and chunk_shape is always there.
py::list Fields(const PyDataset& d) {
  py::list out;
  for (const FieldSpec& f : d.dataset->manifest().fields) {
    py::dict e;
    e["name"] = f.name;
    e["kind"] = FieldKindName(f.kind);
    if (f.kind == FieldKind::kNdarray) {
      e["dtype"] = DTypeName(f.dtype);
      e["shape"] = ShapeTuple(f.shape);
      e["chunk_shape"] = f.chunked() ? ShapeTuple(f.chunk_shape) : py::object(py::none());
    } else {
      e["dtype"] = py::none();
      e["shape"] = py::tuple();
      e["chunk_shape"] = py::none();
    }
    e["meta"] = MetaDict(f.meta);
    out.append(e);
  }
  return out;
}

py::list Splits(const PyDataset& d) {
  py::list out;
  for (const SplitInfo& s : d.dataset->manifest().splits)
    out.append(py::make_tuple(s.name, s.first_sample, s.num_samples));
  return out;
}

py::dict Provenance(const PyDataset& d) { return MembersDict(d.dataset->manifest().provenance); }

py::list Stats(const PyDataset& d) {
  py::list out;
  for (const FieldStats& s : d.dataset->manifest().stats) out.append(MembersDict(s));
  return out;
}

// A decoded ndarray field as a new numpy array (the GIL is released while decoding).
py::object DecodeField(const SampleView& view, size_t field, DType dtype) {
  const Shape shape = Unwrap(view.shape(field));
  py::array out(NumpyDtype(dtype), std::vector<py::ssize_t>(shape.begin(), shape.end()));
  const size_t bytes = static_cast<size_t>(out.nbytes());
  void* dst = out.mutable_data();
  Check(WithoutGil([&] { return view.Decode(field, dst, bytes, ThreadDecoder()); }));
  return py::object(std::move(out));
}

py::object FieldObject(const SampleView& view, const FieldSpec& spec, size_t field) {
  switch (spec.kind) {
    case FieldKind::kNdarray:
      return DecodeField(view, field, spec.dtype);
    case FieldKind::kInt:
      return py::int_(Unwrap(view.int_value(field)));
    case FieldKind::kFloat:
      return py::float_(Unwrap(view.float_value(field)));
    case FieldKind::kString: {
      const std::string_view v = Unwrap(view.bytes_value(field));
      return py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(v.data(), static_cast<py::ssize_t>(v.size()), "replace"));
    }
    case FieldKind::kBytes: {
      const std::string_view v = Unwrap(view.bytes_value(field));
      return py::bytes(v.data(), v.size());
    }
  }
  Throw(Internal("unknown field kind"));
}

SampleView OpenSample(const PyDataset& d, uint64_t index) {
  // Maps and checks the shard on first use.
  return Unwrap(WithoutGil([&] { return d.dataset->Sample(index); }));
}

std::vector<size_t> FieldIndices(const Manifest& m, const py::object& names) {
  std::vector<size_t> out;
  if (names.is_none()) {
    for (size_t i = 0; i < m.fields.size(); ++i) out.push_back(i);
    return out;
  }
  for (const py::handle& n : names) {
    const std::string name = py::cast<std::string>(n);
    const int i = m.FindField(name);
    if (i < 0) Throw(InvalidArgument("the dataset has no field '" + name + "'"));
    out.push_back(static_cast<size_t>(i));
  }
  return out;
}

py::dict Sample(const PyDataset& d, uint64_t index, const py::object& names) {
  const Manifest& m = d.dataset->manifest();
  if (index >= m.num_samples) {
    Throw(OutOfRange("sample " + std::to_string(index) + " is past the end (" + std::to_string(m.num_samples) +
                     " samples)"));
  }
  const std::vector<size_t> fields = FieldIndices(m, names);
  const SampleView view = OpenSample(d, index);
  py::dict out;
  for (size_t f : fields) out[py::str(m.fields[f].name)] = FieldObject(view, m.fields[f], f);
  return out;
}

// The position of ndarray field `name`, after checking it and `index` as region() does.
size_t NdarrayField(const Manifest& m, uint64_t index, const std::string& name) {
  const int f = m.FindField(name);
  if (f < 0 || m.fields[f].kind != FieldKind::kNdarray) Throw(InvalidArgument("no ndarray field '" + name + "'"));
  if (index >= m.num_samples) Throw(OutOfRange("sample " + std::to_string(index) + " is past the end"));
  return static_cast<size_t>(f);
}

// The shape of ndarray field `name` in sample `index`, from the index: nothing is decoded.
py::object FieldShape(const PyDataset& d, uint64_t index, const std::string& name) {
  const size_t f = NdarrayField(d.dataset->manifest(), index, name);
  const SampleView view = OpenSample(d, index);
  return ShapeTuple(Unwrap(view.shape(f)));
}

py::object Region(const PyDataset& d, uint64_t index, const std::string& name, const Shape& start, const Shape& size) {
  const Manifest& m = d.dataset->manifest();
  const size_t f = NdarrayField(m, index, name);
  const uint64_t bytes = Unwrap(ByteSize(size, m.fields[f].dtype));
  if (bytes > d.dataset->options().max_sample_bytes) {
    Throw(ResourceExhausted("region of " + std::to_string(bytes) + " bytes is over the limit"));
  }
  const SampleView view = OpenSample(d, index);
  py::array out(NumpyDtype(m.fields[f].dtype), std::vector<py::ssize_t>(size.begin(), size.end()));
  void* dst = out.mutable_data();
  const size_t bytes_out = static_cast<size_t>(out.nbytes());
  Check(WithoutGil([&] { return view.DecodeRegion(f, start, size, dst, bytes_out, ThreadDecoder()); }));
  return py::object(std::move(out));
}

PyDataset Open(const std::string& path, bool verify_checksums, size_t max_open_shards, const std::string& io,
               const std::string& cache_dir, const std::string& cache_limit) {
  ReadOptions o;
  o.verify_checksums = verify_checksums;
  o.max_open_shards = max_open_shards;
  const std::optional<IoMode> mode = ParseIoMode(io);
  if (!mode) Throw(InvalidArgument("io must be mmap or pread, got '" + io + "'"));
  o.io = *mode;
  o.remote.cache_dir = cache_dir;
  if (!cache_limit.empty()) {
    const Result<uint64_t> limit = ParseByteSize(cache_limit);
    if (!limit.ok()) Throw(InvalidArgument("cache_limit: " + limit.status().message()));
    o.remote.cache_limit = *limit;
  }
  return PyDataset{std::shared_ptr<const Dataset>(Unwrap(WithoutGil([&] { return Dataset::Open(path, o); })))};
}

}  // namespace

void RegisterDataset(py::module_& m) {
  py::class_<PyDataset>(m, "Dataset")
      .def(py::init(&Open), py::arg("path"), py::arg("verify_checksums") = true, py::arg("max_open_shards") = 0,
           py::arg("io") = "mmap", py::arg("cache_dir") = "", py::arg("cache_limit") = "")
      .def_property_readonly("path", [](const PyDataset& d) { return d.dataset->dir(); })
      .def_property_readonly("num_samples", [](const PyDataset& d) { return d.dataset->num_samples(); })
      .def_property_readonly("format_version", [](const PyDataset& d) { return d.dataset->manifest().format_version; })
      .def_property_readonly("num_shards", [](const PyDataset& d) { return d.dataset->manifest().shards.size(); })
      .def("fields", &Fields)
      .def("splits", &Splits)
      .def("classes", [](const PyDataset& d) { return d.dataset->manifest().classes; })
      .def("provenance", &Provenance)
      .def("stats", &Stats)
      .def("sample", &Sample, py::arg("index"), py::arg("fields") = py::none())
      .def("shape", &FieldShape, py::arg("index"), py::arg("field"))
      .def("region", &Region, py::arg("index"), py::arg("field"), py::arg("start"), py::arg("size"));
}

}  // namespace shardify::python
