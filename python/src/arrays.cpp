// Zero-copy exports: numpy arrays and DLPack capsules over memory an owner keeps alive.
#include <pybind11/numpy.h>

#include <cstdint>
#include <vector>

#include "python/src/binding.h"

namespace shardify::python {
namespace {

// The DLPack ABI (the unversioned DLManagedTensor exchanged in a "dltensor" capsule), as
// the DLPack specification defines it. Declared here so no framework header is needed.
namespace dl {
enum DeviceType : int32_t { kCPU = 1, kCUDA = 2 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2 };
struct Device {
  int32_t device_type;
  int32_t device_id;
};
struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // null: compact row-major
  uint64_t byte_offset;
};
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};
}  // namespace dl

constexpr const char* kCapsuleName = "dltensor";

dl::DataType DlpackType(DType t, bool signed_view) {
  const auto bits = static_cast<uint8_t>(DTypeSize(t) * 8);
  switch (t) {
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64:
      return {dl::kInt, bits, 1};
    case DType::kU8:
      return {dl::kUInt, bits, 1};
    case DType::kU16:
    case DType::kU32:
      return {signed_view ? dl::kInt : dl::kUInt, bits, 1};
    case DType::kF16:
    case DType::kF32:
    case DType::kF64:
      return {dl::kFloat, bits, 1};
  }
  return {dl::kUInt, 8, 1};
}

// Owns what a DLPack consumer holds: the shape and a reference to the memory's owner.
// Deleting it needs no GIL (the owner's release is plain C++).
struct Export {
  dl::ManagedTensor managed{};
  std::vector<int64_t> shape;
  std::shared_ptr<const void> owner;
};

void DeleteExport(dl::ManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); }

// Runs when the capsule dies. A consumer that took the tensor renamed the capsule and now
// owns it; otherwise the tensor was never used and is freed here.
void DestroyCapsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsuleName) == 0) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // keep any exception in flight
  auto* managed = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

}  // namespace

py::dtype NumpyDtype(DType t) {
  switch (t) {
    case DType::kU8:
      return py::dtype::of<uint8_t>();
    case DType::kI8:
      return py::dtype::of<int8_t>();
    case DType::kU16:
      return py::dtype::of<uint16_t>();
    case DType::kI16:
      return py::dtype::of<int16_t>();
    case DType::kU32:
      return py::dtype::of<uint32_t>();
    case DType::kI32:
      return py::dtype::of<int32_t>();
    case DType::kF16:
      return py::dtype("float16");
    case DType::kF32:
      return py::dtype::of<float>();
    case DType::kF64:
      return py::dtype::of<double>();
    case DType::kI64:
      return py::dtype::of<int64_t>();
  }
  return py::dtype::of<uint8_t>();
}

py::object ToNumpy(ArrayRef ref) {
  auto* keep = new std::shared_ptr<const void>(std::move(ref.owner));
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
  std::vector<py::ssize_t> shape(ref.shape.begin(), ref.shape.end());
  return py::array(NumpyDtype(ref.dtype), shape, ref.data, base);
}

py::capsule ToDlpack(ArrayRef ref) {
  auto e = std::make_unique<Export>();
  e->shape.assign(ref.shape.begin(), ref.shape.end());
  e->owner = std::move(ref.owner);
  dl::Tensor& t = e->managed.dl_tensor;
  t.data = ref.data;
  // Pinned host memory is exported as plain CPU memory: frameworks refuse kDLCUDAHost.
  t.device = ref.cuda_device >= 0 ? dl::Device{dl::kCUDA, ref.cuda_device} : dl::Device{dl::kCPU, 0};
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = DlpackType(ref.dtype, ref.signed_view);
  t.shape = e->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  e->managed.manager_ctx = e.get();
  e->managed.deleter = DeleteExport;
  PyObject* capsule = PyCapsule_New(&e->managed, kCapsuleName, DestroyCapsule);
  if (capsule == nullptr) throw py::error_already_set();
  e.release();  // owned by the capsule, then by its consumer
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace shardify::python
