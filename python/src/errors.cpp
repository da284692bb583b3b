#include <Python.h>

#include "python/src/binding.h"

namespace shardify::python {
namespace {

PyObject* g_corruption = nullptr;  // shardify.CorruptionError, owned by the module

PyObject* ExceptionType(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return PyExc_ValueError;
    case StatusCode::kNotFound:
      return PyExc_FileNotFoundError;
    case StatusCode::kAlreadyExists:
      return PyExc_FileExistsError;
    case StatusCode::kIOError:
      return PyExc_OSError;
    case StatusCode::kCorruption:
      return g_corruption;
    case StatusCode::kOutOfRange:
      return PyExc_IndexError;
    case StatusCode::kResourceExhausted:
      return PyExc_MemoryError;
    case StatusCode::kCancelled:
      return PyExc_KeyboardInterrupt;
    case StatusCode::kBusy:  // another process is writing there
      return PyExc_BlockingIOError;
    case StatusCode::kUnsupported:
    case StatusCode::kInternal:
    case StatusCode::kOk:
      break;
  }
  return PyExc_RuntimeError;
}

}  // namespace

void Throw(const Status& status) {
  PyErr_SetString(ExceptionType(status.code()), status.message().c_str());
  throw py::error_already_set();
}

void RegisterErrors(py::module_& m) {
  g_corruption = PyErr_NewExceptionWithDoc(
      "shardify.CorruptionError",
      "Bytes on disk disagree with the shard format or their checksum. The message names the\n"
      "file, the sample and the field. A subclass of OSError.",
      PyExc_OSError, nullptr);
  if (g_corruption == nullptr) throw py::error_already_set();
  m.add_object("CorruptionError", py::reinterpret_borrow<py::object>(g_corruption));
}

}  // namespace shardify::python
