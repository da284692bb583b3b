// Surviving files that change under a mapping.
//
// Reading a page of a shared file mapping that the file no longer holds (it was truncated
// after it was mapped) or that the file system cannot deliver (an I/O error on NFS or
// FUSE) raises SIGBUS, whose default action kills the process. A FaultGuard registers a
// mapping's address range in a fixed, lock-free table. A process-wide SIGBUS handler,
// installed with the first registration, looks the faulting address up: inside a
// registered range it maps a page of zeros over the faulting page (mmap MAP_FIXED),
// records the fault in that range's guard and returns, so the interrupted read finishes
// on zeros and the reader turns the record into an error after the read (nothing jumps
// across C++ frames). A SIGBUS outside every registered range goes to the handler that
// was installed before this one; when that was the default action (or SIG_IGN, which
// cannot stop a fault), the default is restored and the signal raised again, so such a
// fault still kills the process as it always did.
//
// The handler calls only async-signal-safe operations (atomics, mmap, sigaction, raise)
// and keeps errno. A handler installed later by someone else (e.g. Python's
// faulthandler.enable()) runs first and decides whether ours runs at all.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/status.h"

namespace shardify::detail {

// Registered address ranges at most (each mapped file holds one while it is mapped).
inline constexpr size_t kMaxGuardedMappings = 32768;

class FaultGuard {
 public:
  // Registers [base, base + size), size > 0. ResourceExhausted when kMaxGuardedMappings
  // ranges are registered; Internal when the handler cannot be installed.
  static Result<std::unique_ptr<FaultGuard>> Register(const void* base, uint64_t size);
  ~FaultGuard();  // unregisters; the range must not be read afterwards
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;

  // True once a read in the range faulted (from any thread). One atomic load.
  bool faulted() const { return first_fault_.load(std::memory_order_acquire) != kNoFault; }
  // Offset from `base` of the first page that faulted; meaningful when faulted().
  uint64_t first_fault() const { return first_fault_.load(std::memory_order_acquire); }

 private:
  static constexpr uint64_t kNoFault = UINT64_MAX;
  FaultGuard() = default;
  size_t slot_ = 0;
  std::atomic<uint64_t> first_fault_{kNoFault};
};

}  // namespace shardify::detail
