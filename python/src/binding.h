// Internal declarations shared by the files of the `shardify._core` extension.
//
// The extension is a thin boundary over format/, reader/ and convert/: it turns Status into
// Python exceptions, releases the GIL around every wait and decode, and hands arrays to
// numpy or (through DLPack) to any framework without copying. It never links LibTorch.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "format/types.h"

namespace shardify::python {

namespace py = pybind11;

// Raises the Python exception for `status` (see errors.cpp for the mapping).
[[noreturn]] void Throw(const Status& status);

template <typename T>
T Unwrap(Result<T> r) {
  if (!r.ok()) Throw(r.status());
  return std::move(r).value();
}
inline void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}

// Runs `f` with the GIL released (for waits, I/O and decoding) and returns its result.
template <typename F>
auto WithoutGil(F&& f) {
  py::gil_scoped_release nogil;
  return f();
}

// numpy's dtype for `t`.
py::dtype NumpyDtype(DType t);

// An array over memory that `owner` keeps alive: the export holds a reference to `owner`
// until the consumer frees the array, and needs no GIL to drop it.
struct ArrayRef {
  void* data = nullptr;
  DType dtype = DType::kU8;
  Shape shape;
  std::shared_ptr<const void> owner;
  int cuda_device = -1;      // >= 0: `data` is device memory of that CUDA device
  bool signed_view = false;  // export u16/u32 as i16/i32 (frameworks without those types)
};

// A numpy array sharing the memory (host memory only).
py::object ToNumpy(ArrayRef ref);
// A DLPack capsule ("dltensor") sharing the memory; its deleter may run on any thread.
py::capsule ToDlpack(ArrayRef ref);

void RegisterErrors(py::module_& m);
void RegisterDataset(py::module_& m);
void RegisterLoader(py::module_& m);
void RegisterConvert(py::module_& m);
void RegisterWriter(py::module_& m);

}  // namespace shardify::python
