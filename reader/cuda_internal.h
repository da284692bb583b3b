// Move-only owners of host and CUDA resources used by the batch ring.
//
// Every CUDA call is compiled only when SHARDIFY_HAVE_CUDA is defined (the toolkit was
// found); at run time CudaDeviceAnswers() decides whether any of it is used. Without a
// device, host buffers are plain 256-byte aligned memory.
#pragma once

#include <cstddef>
#include <utility>

#include "base/status.h"

namespace shardify::detail {

inline constexpr size_t kHostAlignment = 256;

// True when built with CUDA and cudaGetDeviceCount reports at least one device.
// Asked once per process; cheap afterwards.
bool CudaDeviceAnswers();

// A host allocation: pinned (cudaHostAlloc) or 256-byte aligned. Zero-filled.
class HostBuffer {
 public:
  HostBuffer() = default;
  // `pinned` requires CudaDeviceAnswers(). Zero bytes gives an empty buffer.
  static Result<HostBuffer> Allocate(size_t bytes, bool pinned);
  ~HostBuffer() { Reset(); }
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  bool pinned() const { return pinned_; }

 private:
  void Reset();
  void* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
};

// Device memory (cudaMalloc) on the current device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> Allocate(size_t bytes);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Reset();
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A non-blocking CUDA stream (cudaStream_t, type-erased).
class CudaStream {
 public:
  CudaStream() = default;
  static Result<CudaStream> Create();
  ~CudaStream() { Reset(); }
  CudaStream(CudaStream&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  CudaStream& operator=(CudaStream&& o) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  void* get() const { return handle_; }

 private:
  void Reset();
  void* handle_ = nullptr;
};

// A CUDA event without timing (cudaEvent_t, type-erased).
class CudaEvent {
 public:
  CudaEvent() = default;
  static Result<CudaEvent> Create();
  ~CudaEvent() { Reset(); }
  CudaEvent(CudaEvent&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  void* get() const { return handle_; }

 private:
  void Reset();
  void* handle_ = nullptr;
};

// Selects `device` for the calling thread.
Status CudaSetDevice(int device);
// Queues a host-to-device copy of `bytes` on `stream`.
Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, const CudaStream& stream);
// Records `event` on `stream`.
Status RecordEvent(const CudaEvent& event, const CudaStream& stream);
// Records `event` on a stream the caller owns (a cudaStream_t; null = the legacy default).
Status RecordEventOn(const CudaEvent& event, void* stream);
// Makes `stream` (a cudaStream_t) wait on the device for `event` (a cudaEvent_t).
Status StreamWaitEvent(void* stream, void* event);
// Copies `bytes` from device memory to host memory and waits for it.
Status CopyToHost(void* dst, const void* src, size_t bytes);
// Blocks until the event `event` (a cudaEvent_t, e.g. Batch::device_ready_event) completes.
Status WaitEvent(void* event);

}  // namespace shardify::detail
