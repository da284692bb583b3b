// `_core.Writer`: a DatasetWriter fed from Python. Each write() checks the sample against
// the schema and copies its arrays once, with the GIL held; encoding, checksums and file
// writes then run on C++ threads (an ordered pipeline, so the bytes do not depend on the
// thread count), with the GIL released.
#include "format/writer.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/parallel.h"
#include "format/chunking.h"
#include "format/fields.h"
#include "format/layout.h"
#include "python/src/binding.h"
#include "python/src/writer_values.h"

#ifdef SHARDIFY_PYTHON_CONVERT
#include "convert/sources/fg_locations.h"
#endif

namespace shardify::python {
namespace {

constexpr size_t kBatchSamples = 256;       // samples handed to the encode threads at once
constexpr size_t kBatchBytes = 8ull << 20;  // ... or fewer, once they hold this many bytes

// Samples numbered from `first`, encoded together by one thread.
struct Batch {
  uint64_t first = 0;
  std::vector<SampleInput> inputs;
  std::vector<EncodedSamplePtr> encoded;
  size_t bytes = 0;
  Status status;
  bool ready = false;
};

// Encodes batches on `threads` threads and appends them to the writer in the order pushed.
// The first error stops it; Push() and Drain() return it from then on.
class Pipeline {
 public:
  // `prepare` completes a sample before it is encoded (foreground locations); may be empty.
  Pipeline(DatasetWriter* writer, size_t threads, std::function<Status(SampleInput&, uint64_t)> prepare)
      : writer_(writer), prepare_(std::move(prepare)), window_(2 * threads + 2) {
    for (size_t t = 0; t < threads; ++t) encoders_.push_back(writer->NewEncoder());
    for (size_t t = 0; t < threads; ++t) threads_.emplace_back([this, t] { EncodeLoop(*encoders_[t]); });
    threads_.emplace_back([this] { AppendLoop(); });
  }
  ~Pipeline() { Stop(); }

  // Blocks while the window is full.
  Status Push(Batch&& batch) {
    std::unique_lock<std::mutex> l(mu_);
    space_cv_.wait(l, [&] { return !status_.ok() || pushed_ - appended_ < window_; });
    if (!status_.ok()) return status_;
    queue_.push_back(std::make_unique<Batch>(std::move(batch)));
    order_.push_back(queue_.back().get());
    ++pushed_;
    work_cv_.notify_one();
    return Status::Ok();
  }

  // Waits until every batch pushed is appended.
  Status Drain() {
    std::unique_lock<std::mutex> l(mu_);
    space_cv_.wait(l, [&] { return !status_.ok() || appended_ == pushed_; });
    return status_;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    ready_cv_.notify_all();
    space_cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Fail(const Status& s) {  // with mu_ held
    if (status_.ok()) status_ = s;
    space_cv_.notify_all();
    ready_cv_.notify_all();
  }

  void EncodeLoop(Encoder& encoder) {
    for (;;) {
      Batch* b;
      {
        std::unique_lock<std::mutex> l(mu_);
        work_cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        b = queue_.front().get();
        owned_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      Status s;
      for (size_t k = 0; k < b->inputs.size() && s.ok(); ++k) {
        const uint64_t number = b->first + k;
        if (prepare_) s = prepare_(b->inputs[k], number);
        if (!s.ok()) break;
        Result<EncodedSamplePtr> e = encoder.Encode(std::move(b->inputs[k]));
        if (!e.ok()) s = e.status();
        if (s.ok()) b->encoded.push_back(std::move(e).value());
        if (!s.ok()) s = s.WithContext("sample " + std::to_string(number));
      }
      std::lock_guard<std::mutex> l(mu_);
      b->status = s;
      b->ready = true;
      if (b == order_.front()) ready_cv_.notify_one();
    }
  }

  void AppendLoop() {
    for (;;) {
      Batch* b;
      {
        std::unique_lock<std::mutex> l(mu_);
        ready_cv_.wait(l, [&] { return stop_ || (!order_.empty() && order_.front()->ready); });
        if (stop_) return;
        b = order_.front();
        if (!b->status.ok()) return Fail(b->status);
      }
      Status s;
      for (size_t k = 0; k < b->encoded.size() && s.ok(); ++k) {
        s = writer_->Append(std::move(b->encoded[k]));
        if (!s.ok()) s = s.WithContext("sample " + std::to_string(b->first + k));
      }
      std::lock_guard<std::mutex> l(mu_);
      if (!s.ok()) return Fail(s);
      order_.pop_front();
      owned_.erase(std::find_if(owned_.begin(), owned_.end(), [&](const auto& p) { return p.get() == b; }));
      ++appended_;
      space_cv_.notify_all();
    }
  }

  DatasetWriter* writer_;
  std::function<Status(SampleInput&, uint64_t)> prepare_;
  const size_t window_;  // batches pushed but not yet appended
  std::vector<std::unique_ptr<Encoder>> encoders_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_, space_cv_;
  std::deque<std::unique_ptr<Batch>> queue_;   // waiting for an encode thread
  std::vector<std::unique_ptr<Batch>> owned_;  // being encoded or waiting to be appended
  std::deque<Batch*> order_;                   // pushed, not yet appended, in order
  size_t pushed_ = 0, appended_ = 0;
  bool stop_ = false;
  Status status_;
};

// The role a conventional field name implies (format/fields.h), or "".
std::string DefaultRole(const std::string& name, FieldKind kind) {
  const bool array = kind == FieldKind::kNdarray;
  if (name == kImageField && array) return kRoleImage;
  if (name == kMaskField && array) return kRoleMask;
  if (name == kLabelField && kind == FieldKind::kInt) return kRoleLabel;
  if (name == kPathField && kind == FieldKind::kString) return kRolePath;
  auto ends = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
  };
  if (array && (ends(kSpacingSuffix) || ends(kOriginSuffix) || ends(kDirectionSuffix))) return kRoleGeometry;
  if (kind == FieldKind::kBytes && ends(kNiftiHeaderSuffix)) return kRoleNiftiHeader;
  if (array && ends(kFgLocationsSuffix)) return kRoleFgLocations;
  return "";
}

struct Field {
  FieldSpec spec;
  bool finite = false;    // NaN and infinities are refused
  bool computed = false;  // written by the writer (mask.fg_locations), not by the caller
  py::object dtype;       // numpy's, for ndarray fields
};

class PyWriter {
 public:
  PyWriter(const std::string& dir, const py::list& fields, const py::dict& options) {
    for (const auto& item : fields) fields_.push_back(ParseField(py::cast<py::dict>(item)));
    WriterOptions o = ParseOptions(options);
    const size_t threads = WorkerCount(options.contains("threads") ? py::cast<size_t>(options["threads"]) : 0, 1 << 20);
    std::function<Status(SampleInput&, uint64_t)> prepare;
    if (options.contains("fg_locations")) prepare = FgPreparer(py::cast<uint64_t>(options["fg_locations"]));
    std::vector<FieldSpec> specs;
    for (const Field& f : fields_) specs.push_back(f.spec);
    const std::string where = o.part.count > 0 ? PartDir(dir, o.part) : dir;
    first_ = o.part.first_sample;
    writer_ = Unwrap(WithoutGil([&] { return DatasetWriter::Create(where, std::move(specs), o); }));
    threads_ = threads;
    prepare_ = std::move(prepare);
    const py::object dict = options.contains("dict") ? options["dict"] : py::object(py::none());
    if (o.codec == Codec::kZstd && o.part.count == 0 && (dict.is_none() || py::cast<bool>(dict))) {
      dict_forced_ = !dict.is_none();
      dict_fields_ = SmallFixedArrays();
    }
    if (dict_fields_.empty()) pipeline_ = std::make_unique<Pipeline>(writer_.get(), threads_, prepare_);
  }
  ~PyWriter() { Abort(); }

  void Write(const py::handle& obj, const py::handle& split_name) {
    if (closed_) Throw(InvalidArgument("write() on a writer that is closed"));
    const uint64_t number = first_ + written_;
    const std::string where = "sample " + std::to_string(number);
    if (!PyDict_Check(obj.ptr())) Throw(InvalidArgument(where + ": a dict of fields, got " + TypeName(obj)));
    const auto sample = py::reinterpret_borrow<py::dict>(obj);
    const std::string split = TextValue(split_name, "a str", where + ": split");
    if (split.empty()) Throw(InvalidArgument(where + ": empty split name"));
    const bool new_split = split != last_split_;
    if (new_split && std::find(splits_.begin(), splits_.end(), split) != splits_.end())
      Throw(InvalidArgument(where + ": split '" + split +
                            "' must be written as one contiguous run, but it resumes here"));
    SampleInput in;
    in.split = split;
    in.values.resize(fields_.size());
    size_t used = 0, bytes = 0;
    for (size_t f = 0; f < fields_.size(); ++f) {
      const Field& field = fields_[f];
      if (field.computed) continue;
      const py::str key(field.spec.name);
      if (!sample.contains(key)) Throw(InvalidArgument(where + ": field '" + field.spec.name + "' is missing"));
      in.values[f] = ToValue(field, sample[key], where + ": field '" + field.spec.name + "'");
      bytes += in.values[f].bytes.size();
      ++used;
    }
    if (used != py::len(sample)) Throw(InvalidArgument(where + ": " + UnknownKeys(sample)));
    if (new_split) splits_.push_back(split);
    last_split_ = split;
    ++written_;
    batch_.bytes += bytes;
    batch_.inputs.push_back(std::move(in));
    if (batch_.inputs.size() >= kBatchSamples || batch_.bytes >= kBatchBytes) Flush();
  }

  // Writes what is queued and the manifest; returns {samples, shards, bytes}.
  py::dict Close() {
    if (closed_) Throw(InvalidArgument("close() on a writer that is closed"));
    Flush();
    if (!pipeline_) StartPipeline();
    closed_ = true;
    Status s = WithoutGil([&] {
      RETURN_IF_ERROR(pipeline_->Drain());
      pipeline_.reset();
      return writer_->Finish();
    });
    if (!s.ok()) {
      Abort();
      Throw(s);
    }
    py::dict out;
    out["samples"] = writer_->manifest().num_samples;
    out["shards"] = writer_->manifest().shards.size();
    out["bytes"] = writer_->bytes_written();
    out["dictionaries"] = dictionaries_;
    writer_.reset();
    return out;
  }

  // Stops without a manifest: the files written so far are removed.
  void Abort() {
    closed_ = true;
    py::gil_scoped_release nogil;
    pipeline_.reset();
    writer_.reset();
  }

  uint64_t written() const { return written_; }

 private:
  void Flush() {
    if (batch_.inputs.empty()) return;
    if (!pipeline_) {  // holding the first samples for the dictionaries
      for (SampleInput& in : batch_.inputs) held_.push_back(std::move(in));
      batch_ = Batch{};
      if (held_.size() >= kDictionaryMaxSamples) StartPipeline();
      return;
    }
    batch_.first = first_ + written_ - batch_.inputs.size();
    Status s = WithoutGil([&] { return pipeline_->Push(std::move(batch_)); });
    batch_ = Batch{};
    if (!s.ok()) {
      Abort();
      Throw(s);
    }
  }

  // Ndarray fields a dictionary may pay for (format/writer.h): one fixed shape, not chunked,
  // at most kSmallSampleBytes a sample.
  std::vector<size_t> SmallFixedArrays() const {
    std::vector<size_t> out;
    for (size_t f = 0; f < fields_.size(); ++f) {
      const FieldSpec& spec = fields_[f].spec;
      if (spec.kind != FieldKind::kNdarray || spec.chunked() || spec.variable_shape() || fields_[f].computed) continue;
      uint64_t bytes = DTypeSize(spec.dtype);
      for (int64_t d : spec.shape) bytes *= static_cast<uint64_t>(d);
      if (bytes > 0 && bytes <= kSmallSampleBytes) out.push_back(f);
    }
    return out;
  }

  // Trains the dictionaries from the samples held (at least kDictionaryMinSamples of them,
  // unless asked for; a field whose training fails goes without, as in the converter), then
  // starts the encode threads with the held samples.
  void StartPipeline() {
    const size_t n = std::min(held_.size(), kDictionaryMaxSamples);
    Status s = WithoutGil([&] {
      for (size_t f : n >= kDictionaryMinSamples || (dict_forced_ && n > 0) ? dict_fields_ : std::vector<size_t>{}) {
        std::vector<std::vector<uint8_t>> samples;
        for (size_t k = 0; k < n; ++k) samples.push_back(held_[k].values[f].bytes);
        if (writer_->TrainDictionary(fields_[f].spec.name, samples).ok()) dictionaries_.push_back(fields_[f].spec.name);
      }
      pipeline_ = std::make_unique<Pipeline>(writer_.get(), threads_, prepare_);
      for (size_t k = 0; k < held_.size(); k += kBatchSamples) {
        Batch b;
        b.first = first_ + k;
        for (size_t j = k; j < std::min(held_.size(), k + kBatchSamples); ++j) b.inputs.push_back(std::move(held_[j]));
        RETURN_IF_ERROR(pipeline_->Push(std::move(b)));
      }
      return Status::Ok();
    });
    held_.clear();
    if (!s.ok()) {
      Abort();
      Throw(s);
    }
  }

  std::string UnknownKeys(const py::dict& sample) const {
    std::string extra;
    for (const auto& item : sample) {
      const auto known = std::any_of(fields_.begin(), fields_.end(), [&](const Field& f) {
        return !f.computed && py::str(f.spec.name).equal(item.first);
      });
      if (!known) extra += (extra.empty() ? "" : ", ") + Printable(py::repr(item.first));
    }
    return "fields " + extra + " are not in the schema";
  }

  Field ParseField(const py::dict& d) {
    Field f;
    f.spec.name = py::cast<std::string>(d["name"]);
    const std::string kind = py::cast<std::string>(d["kind"]);
    const char* kinds[] = {"ndarray", "int", "float", "string", "bytes"};
    const auto k = std::find_if(std::begin(kinds), std::end(kinds), [&](const char* n) { return kind == n; });
    if (k == std::end(kinds)) Throw(InvalidArgument("field '" + f.spec.name + "': unknown kind '" + kind + "'"));
    f.spec.kind = static_cast<FieldKind>(k - std::begin(kinds));
    if (f.spec.kind == FieldKind::kNdarray) {
      const std::string dtype = py::cast<std::string>(d["dtype"]);
      const auto t = ParseDType(dtype);
      if (!t) Throw(InvalidArgument("field '" + f.spec.name + "': unknown dtype '" + dtype + "'"));
      f.spec.dtype = *t;
      f.spec.shape = py::cast<Shape>(d["shape"]);
      if (d.contains("chunks")) f.spec.chunk_shape = py::cast<Shape>(d["chunks"]);
      f.dtype = NumpyDtype(*t);
    }
    if (d.contains("meta")) {
      for (const auto& [key, value] : py::cast<std::vector<std::pair<std::string, std::string>>>(d["meta"]))
        f.spec.meta.push_back({key, value});
    }
    const std::string role = DefaultRole(f.spec.name, f.spec.kind);
    if (MetaValue(f.spec, kMetaRole).empty() && !role.empty())
      f.spec.meta.insert(f.spec.meta.begin(), {kMetaRole, role});
    f.finite = d.contains("finite") ? py::cast<bool>(d["finite"]) : role == kRoleGeometry;
    f.computed = d.contains("computed") && py::cast<bool>(d["computed"]);
    return f;
  }

  static WriterOptions ParseOptions(const py::dict& d) {
    WriterOptions o;
    auto get = [&](const char* key) { return d.contains(key) ? d[key] : py::object(py::none()); };
    if (!get("shard_bytes").is_none()) o.target_shard_bytes = py::cast<uint64_t>(get("shard_bytes"));
    if (!get("codec").is_none()) {
      const std::string c = py::cast<std::string>(get("codec"));
      if (c != "zstd" && c != "raw") Throw(InvalidArgument("codec must be 'zstd' or 'raw', got '" + c + "'"));
      o.codec = c == "raw" ? Codec::kRaw : Codec::kZstd;
    }
    if (!get("level").is_none()) o.level = py::cast<int>(get("level"));
    if (!get("field_levels").is_none())
      o.field_levels = py::cast<std::vector<std::pair<std::string, int>>>(get("field_levels"));
    if (!get("stats").is_none()) o.compute_stats = py::cast<bool>(get("stats"));
    if (!get("overwrite").is_none()) o.overwrite = py::cast<bool>(get("overwrite"));
    if (!get("fsync").is_none()) o.fsync = py::cast<bool>(get("fsync"));
    if (!get("classes").is_none()) o.classes = py::cast<std::vector<std::string>>(get("classes"));
    o.provenance.converter = "shardify.Writer";
    o.provenance.converter_version = SHARDIFY_VERSION;
    if (!get("source").is_none()) o.provenance.source = py::cast<std::string>(get("source"));
    if (!get("provenance").is_none()) {
      for (const auto& [k, v] : py::cast<std::vector<std::pair<std::string, std::string>>>(get("provenance")))
        o.provenance.options.push_back({k, v});
    }
    if (!get("part").is_none()) {
      const auto p = py::cast<std::vector<uint64_t>>(get("part"));
      if (p.size() != 4) Throw(InvalidArgument("part is (index, count, first_sample, samples)"));
      o.part = {static_cast<uint32_t>(p[0]), static_cast<uint32_t>(p[1]), p[2], p[3]};
    }
    return o;
  }

  std::function<Status(SampleInput&, uint64_t)> FgPreparer(uint64_t cap) {
    auto named = [&](const char* n) {
      for (size_t f = 0; f < fields_.size(); ++f)
        if (fields_[f].spec.name == n) return static_cast<int>(f);
      return -1;
    };
    const int mask = named(kMaskField), loc = named(kMaskFgLocationsField);
    if (mask < 0 || loc < 0) Throw(InvalidArgument("foreground locations need the fields mask and mask.fg_locations"));
#ifdef SHARDIFY_PYTHON_CONVERT
    const FieldSpec spec = fields_[mask].spec;
    return [spec, mask, loc, cap](SampleInput& in, uint64_t number) -> Status {
      ASSIGN_OR_RETURN(in.values[loc], convert::FgLocations(spec, in.values[mask], cap, 0, number));
      return Status::Ok();
    };
#else
    (void)cap;
    Throw(Unsupported("foreground locations need a shardify built with its converter (ITK)"));
#endif
  }

  FieldValue ToValue(const Field& field, const py::handle& obj, const std::string& where) const {
    const FieldSpec& spec = field.spec;
    switch (spec.kind) {
      case FieldKind::kInt:
        return FieldValue::Int(IntValue(obj, where));
      case FieldKind::kFloat:
        return FieldValue::Float(FloatValue(obj, field.finite, where));
      case FieldKind::kString:
        return FieldValue::String(TextValue(obj, "a string field", where));
      case FieldKind::kBytes:
        return FieldValue::Bytes(BytesValue(obj, where));
      case FieldKind::kNdarray:
        break;
    }
    return ArrayValue(field, obj, where);
  }

  // The array's elements, copied once (numpy copies a non-contiguous array straight in).
  FieldValue ArrayValue(const Field& field, const py::handle& obj, const std::string& where) const {
    const FieldSpec& spec = field.spec;
    py::array a;
    if (py::isinstance<py::array>(obj)) {
      a = py::reinterpret_borrow<py::array>(obj);
      if (!a.dtype().equal(field.dtype))
        Throw(InvalidArgument(where + ": dtype " + std::string(py::str(a.dtype())) + ", the field is " +
                              DTypeName(spec.dtype) + " (" + std::string(py::str(field.dtype)) + ")"));
    } else if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
      a = ListValue(obj, spec.dtype, field.dtype, where);
    } else {
      Throw(InvalidArgument(where + ": an ndarray field, got " + TypeName(obj)));
    }
    const Shape shape(a.shape(), a.shape() + a.ndim());
    if (!ShapeMatches(spec.shape, shape))
      Throw(InvalidArgument(where + ": shape " + ShapeToString(shape) + " does not fit the field's " +
                            ShapeToString(spec.shape)));
    std::vector<uint8_t> bytes(static_cast<size_t>(a.nbytes()));
    if (a.flags() & py::array::c_style) {
      if (!bytes.empty()) std::memcpy(bytes.data(), a.data(), bytes.size());
    } else {
      py::array into(field.dtype, std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()), bytes.data(),
                     py::str(""));  // a base: numpy writes into `bytes`
      py::module_::import("numpy").attr("copyto")(into, a);
    }
    if (field.finite && !AllFinite(spec.dtype, bytes.data(), bytes.size()))
      Throw(InvalidArgument(where + ": holds NaN or infinity"));
    return FieldValue::Array(std::move(bytes), shape);
  }

  std::vector<Field> fields_;
  std::unique_ptr<DatasetWriter> writer_;
  std::unique_ptr<Pipeline> pipeline_;  // destroyed before writer_; started once dictionaries are trained
  size_t threads_ = 1;
  std::function<Status(SampleInput&, uint64_t)> prepare_;
  std::vector<size_t> dict_fields_;        // fields to train a dictionary for, from the first samples
  bool dict_forced_ = false;               // dict=True: train from fewer than kDictionaryMinSamples too
  std::vector<SampleInput> held_;          // the first samples, held until the dictionaries are trained
  std::vector<std::string> dictionaries_;  // fields that got one
  bool closed_ = false;
  Batch batch_;
  uint64_t first_ = 0, written_ = 0;
  std::string last_split_;
  std::vector<std::string> splits_;
};

// The state of part `index` of `count` at `dir`: None while it is not complete, else the
// part's (first_sample, samples planned, samples written, {provenance option: value}).
py::object PartState(const std::string& dir, uint32_t index, uint32_t count) {
  const std::string part_dir = PartDir(dir, PartInfo{index, count, 0, 0});
  Result<Manifest> m = WithoutGil([&] { return ReadPartManifest(part_dir); });
  if (!m.ok() && m.status().code() == StatusCode::kNotFound) return py::none();
  const Manifest manifest = Unwrap(std::move(m));
  const PartInfo p = Unwrap(PartOf(manifest, part_dir));
  auto text = [](const std::string& t) {  // ours are UTF-8; another byte becomes U+FFFD
    return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(t.data(), static_cast<Py_ssize_t>(t.size()), "replace"));
  };
  py::dict options;
  for (const KeyValue& kv : manifest.provenance.options) options[text(kv.key)] = text(kv.value);
  return py::make_tuple(p.first_sample, p.samples, manifest.num_samples, options);
}

py::dict MergeAll(const std::string& dir, bool fsync) {
  MergeOptions o;
  o.fsync = fsync;
  const MergeSummary s = Unwrap(WithoutGil([&] { return MergeParts(dir, o); }));
  py::dict out;
  out["parts"] = s.parts;
  out["samples"] = s.samples;
  out["shards"] = s.shards;
  out["already_merged"] = s.already_merged;
  return out;
}

}  // namespace

void RegisterWriter(py::module_& m) {
  py::class_<PyWriter>(m, "Writer")
      .def(py::init<const std::string&, const py::list&, const py::dict&>(), py::arg("path"), py::arg("fields"),
           py::arg("options"))
      .def("write", &PyWriter::Write, py::arg("sample"), py::arg("split"))
      .def("close", &PyWriter::Close)
      .def("abort", &PyWriter::Abort)
      .def_property_readonly("samples_written", &PyWriter::written);
  m.def("part_state", &PartState, py::arg("path"), py::arg("index"), py::arg("count"));
  m.def("merge_parts", &MergeAll, py::arg("path"), py::arg("fsync") = true);
  m.def(
      "remove_parts", [](const std::string& path) { Check(WithoutGil([&] { return RemoveParts(path); })); },
      py::arg("path"));
  m.def(
      "choose_chunk_shape",
      [](const Shape& shape, const Shape& patch, size_t elem_size) {
        const bool valid = shape.size() == patch.size() && elem_size >= 1 &&
                           std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 1; }) &&
                           std::all_of(patch.begin(), patch.end(), [](int64_t d) { return d >= 1; });
        if (!valid) throw py::value_error("choose_chunk_shape: shape and patch of one rank, every size >= 1");
        return ChooseChunkShape(shape, patch, elem_size);
      },
      py::arg("shape"), py::arg("patch"), py::arg("elem_size"));
}

}  // namespace shardify::python
