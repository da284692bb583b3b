#include <cstdlib>
#include <cstring>
#include <string>

#include "reader/cuda_internal.h"

#ifdef SHARDIFY_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace shardify::detail {
namespace {

#ifdef SHARDIFY_HAVE_CUDA
Status FromCuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return IOError(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
#else
Status NoCuda(const char* what) {
  return Unsupported(std::string("cuda: ") + what + ": built without the CUDA toolkit");
}
#endif

}  // namespace

bool CudaDeviceAnswers() {
#ifdef SHARDIFY_HAVE_CUDA
  static const bool answers = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n >= 1;
  }();
  return answers;
#else
  return false;
#endif
}

Result<HostBuffer> HostBuffer::Allocate(size_t bytes, bool pinned) {
  HostBuffer b;
  if (bytes == 0) return b;
  const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  if (pinned) {
#ifdef SHARDIFY_HAVE_CUDA
    RETURN_IF_ERROR(FromCuda(cudaHostAlloc(&b.data_, rounded, cudaHostAllocPortable), "cudaHostAlloc"));
    b.pinned_ = true;
#else
    return NoCuda("cudaHostAlloc");
#endif
  } else {
    b.data_ = std::aligned_alloc(kHostAlignment, rounded);
    if (b.data_ == nullptr) {
      return ResourceExhausted("cannot allocate " + std::to_string(rounded) + " bytes of host memory");
    }
  }
  b.size_ = rounded;
  std::memset(b.data_, 0, rounded);
  return b;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    pinned_ = std::exchange(o.pinned_, false);
  }
  return *this;
}

void HostBuffer::Reset() {
  if (data_ == nullptr) return;
#ifdef SHARDIFY_HAVE_CUDA
  if (pinned_) {
    cudaFreeHost(data_);
  } else {
    std::free(data_);
  }
#else
  std::free(data_);
#endif
  data_ = nullptr;
  size_ = 0;
}

Result<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
#ifdef SHARDIFY_HAVE_CUDA
  RETURN_IF_ERROR(FromCuda(cudaMalloc(&b.data_, bytes), "cudaMalloc"));
  b.size_ = bytes;
  return b;
#else
  return NoCuda("cudaMalloc");
#endif
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
#ifdef SHARDIFY_HAVE_CUDA
  if (data_ != nullptr) cudaFree(data_);
#endif
  data_ = nullptr;
  size_ = 0;
}

Result<CudaStream> CudaStream::Create() {
#ifdef SHARDIFY_HAVE_CUDA
  CudaStream s;
  cudaStream_t h = nullptr;
  RETURN_IF_ERROR(FromCuda(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  s.handle_ = h;
  return s;
#else
  return NoCuda("cudaStreamCreate");
#endif
}

CudaStream& CudaStream::operator=(CudaStream&& o) noexcept {
  if (this != &o) {
    Reset();
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

void CudaStream::Reset() {
#ifdef SHARDIFY_HAVE_CUDA
  if (handle_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
#endif
  handle_ = nullptr;
}

Result<CudaEvent> CudaEvent::Create() {
#ifdef SHARDIFY_HAVE_CUDA
  CudaEvent e;
  cudaEvent_t h = nullptr;
  RETURN_IF_ERROR(FromCuda(cudaEventCreateWithFlags(&h, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
  e.handle_ = h;
  return e;
#else
  return NoCuda("cudaEventCreate");
#endif
}

CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    Reset();
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

void CudaEvent::Reset() {
#ifdef SHARDIFY_HAVE_CUDA
  if (handle_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
#endif
  handle_ = nullptr;
}

Status CudaSetDevice(int device) {
#ifdef SHARDIFY_HAVE_CUDA
  return FromCuda(cudaSetDevice(device), "cudaSetDevice");
#else
  (void)device;
  return NoCuda("cudaSetDevice");
#endif
}

Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, const CudaStream& stream) {
#ifdef SHARDIFY_HAVE_CUDA
  return FromCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream.get())),
                  "cudaMemcpyAsync");
#else
  (void)dst, (void)src, (void)bytes, (void)stream;
  return NoCuda("cudaMemcpyAsync");
#endif
}

Status RecordEvent(const CudaEvent& event, const CudaStream& stream) { return RecordEventOn(event, stream.get()); }

Status RecordEventOn(const CudaEvent& event, void* stream) {
#ifdef SHARDIFY_HAVE_CUDA
  return FromCuda(cudaEventRecord(static_cast<cudaEvent_t>(event.get()), static_cast<cudaStream_t>(stream)),
                  "cudaEventRecord");
#else
  (void)event, (void)stream;
  return NoCuda("cudaEventRecord");
#endif
}

Status StreamWaitEvent(void* stream, void* event) {
#ifdef SHARDIFY_HAVE_CUDA
  return FromCuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
                  "cudaStreamWaitEvent");
#else
  (void)stream, (void)event;
  return NoCuda("cudaStreamWaitEvent");
#endif
}

Status CopyToHost(void* dst, const void* src, size_t bytes) {
#ifdef SHARDIFY_HAVE_CUDA
  return FromCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
#else
  (void)dst, (void)src, (void)bytes;
  return NoCuda("cudaMemcpy");
#endif
}

Status WaitEvent(void* event) {
#ifdef SHARDIFY_HAVE_CUDA
  return FromCuda(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
#else
  (void)event;
  return NoCuda("cudaEventSynchronize");
#endif
}

}  // namespace shardify::detail
