// `_core.convert`: the converter, driven by the same flags as the shardify command line.
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "python/src/binding.h"

#ifdef SHARDIFY_PYTHON_CONVERT
#include "convert/convert.h"
#include "convert/pipeline/parts.h"
#include "convert/programs/cli.h"
#endif

namespace shardify::python {
namespace {

#ifdef SHARDIFY_PYTHON_CONVERT
using convert::ConvertSummary;
using convert::Progress;

// Calls a Python progress callback from the converting thread at most every `interval`,
// and turns Ctrl-C or an exception raised by the callback into cancelling the conversion.
class PythonProgress final : public convert::ProgressSink {
 public:
  PythonProgress(py::object callback, std::atomic<bool>* cancel) : callback_(std::move(callback)), cancel_(cancel) {}
  ~PythonProgress() override {
    if (type_ != nullptr || value_ != nullptr || traceback_ != nullptr) {
      py::gil_scoped_acquire gil;
      Py_XDECREF(type_);
      Py_XDECREF(value_);
      Py_XDECREF(traceback_);
    }
  }

  void OnProgress(const Progress& p) override {
    const auto now = std::chrono::steady_clock::now();
    const bool last = p.total != 0 && p.done == p.total;
    const bool new_phase = phase_ != p.phase;  // the first report of a phase always goes out
    if (!last && !new_phase && now - last_ < kInterval) return;
    last_ = now;
    phase_ = p.phase;
    py::gil_scoped_acquire gil;
    if (type_ != nullptr) return;  // already cancelling
    if (PyErr_CheckSignals() == 0 && !callback_.is_none()) {
      try {
        callback_(p.phase, p.done, p.total, p.bytes_in);
      } catch (py::error_already_set& e) {
        e.restore();
      }
    }
    if (PyErr_Occurred() != nullptr) {
      PyErr_Fetch(&type_, &value_, &traceback_);
      cancel_->store(true);
    }
  }

  // Re-raises what stopped the conversion, if anything did. Needs the GIL.
  void RaisePending() {
    if (type_ == nullptr) return;
    PyErr_Restore(type_, value_, traceback_);
    type_ = value_ = traceback_ = nullptr;
    throw py::error_already_set();
  }

 private:
  static constexpr std::chrono::milliseconds kInterval{100};
  py::object callback_;
  std::atomic<bool>* cancel_;
  std::chrono::steady_clock::time_point last_{};
  std::string phase_;
  PyObject *type_ = nullptr, *value_ = nullptr, *traceback_ = nullptr;
};

py::dict SummaryDict(const ConvertSummary& s) {
  py::dict out;
  out["layout"] = s.layout;
  py::dict splits;
  for (const auto& c : s.splits) splits[py::str(c.name)] = c.samples;
  out["splits"] = splits;
  out["classes"] = s.classes;
  out["fields"] = s.fields;
  out["warnings"] = s.warnings;
  out["preprocessing"] = s.preprocessing;
  py::list skipped;
  for (const auto& k : s.skipped) skipped.append(py::make_tuple(k.input, k.reason));
  out["skipped"] = skipped;
  out["samples"] = s.samples;
  out["ignored_files"] = s.ignored_files;
  out["bytes_in"] = s.bytes_in;
  out["bytes_out"] = s.bytes_out;
  out["shards"] = s.shards;
  out["seconds"] = s.seconds;
  out["dry_run"] = s.dry_run;
  out["dictionary"] = s.dictionary;
  out["codec"] = s.codec;
  out["part"] = s.part.count > 0 ? py::object(py::str(PartName(s.part))) : py::object(py::none());
  out["part_complete"] = s.part_state != ConvertSummary::PartState::kConverted;
  out["uploaded_to"] = s.uploaded_to.empty() ? py::object(py::none()) : py::object(py::str(s.uploaded_to));
  out["uploaded_objects"] = s.uploaded_objects;
  out["text"] = convert::FormatSummary(s);
  return out;
}

py::dict Merge(const std::string& dest, bool fsync) {
  Result<MergeSummary> r = WithoutGil([&] { return convert::Merge(dest, fsync); });
  const MergeSummary s = Unwrap(std::move(r));
  py::dict splits;
  for (const auto& sp : s.splits) splits[py::str(sp.name)] = sp.num_samples;
  py::dict out;
  out["parts"] = s.parts;
  out["samples"] = s.samples;
  out["shards"] = s.shards;
  out["splits"] = splits;
  out["shards_rewritten"] = s.shards_rewritten;
  out["bytes_rewritten"] = s.bytes_rewritten;
  out["skipped"] = s.table_rows;
  out["already_merged"] = s.already_merged;
  out["text"] = convert::FormatMergeSummary(dest, s);
  return out;
}

py::dict Convert(const std::vector<std::string>& args, const py::object& progress) {
  convert::CommandLine c = Unwrap(convert::ParseCommandLine(args));
  if (c.help) Throw(InvalidArgument("--help is not an option of convert(); see help(shardify.convert)"));
  std::atomic<bool> cancel{false};
  c.options.cancel = &cancel;
  PythonProgress sink(progress, &cancel);
  Result<ConvertSummary> r = WithoutGil([&] { return convert::Convert(c.options, &sink); });
  sink.RaisePending();
  return SummaryDict(Unwrap(std::move(r)));
}

py::list Flags() {
  py::list out;
  for (const convert::FlagInfo& f : convert::CommandLineFlags())
    out.append(py::make_tuple(f.name, f.takes_value, f.help));
  return out;
}
#endif

}  // namespace

void RegisterConvert(py::module_& m) {
#ifdef SHARDIFY_PYTHON_CONVERT
  m.attr("HAVE_CONVERT") = true;
  m.def("convert", &Convert, py::arg("args"), py::arg("progress") = py::none());
  m.def("convert_flags", &Flags);
  m.def("convert_help", &convert::CommandLineHelp);
  m.def("merge", &Merge, py::arg("dest"), py::arg("fsync") = true);
#else
  m.attr("HAVE_CONVERT") = false;
#endif
}

}  // namespace shardify::python
