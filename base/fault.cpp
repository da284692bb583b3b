#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/fault_internal.h"

namespace shardify::detail {
namespace {

// One registered range. `begin` is published last (release) and cleared first, so the
// handler sees either a complete entry or none.
struct Entry {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<std::atomic<uint64_t>*> first_fault{nullptr};
  std::atomic<bool> used{false};
};

Entry g_entries[kMaxGuardedMappings];
std::atomic<size_t> g_high{0};  // entries [0, g_high) have been used; the handler scans those
uintptr_t g_page = 4096;
struct sigaction g_previous;  // written once, before our handler is installed

// The handler that was there before ours, for signals that are not ours.
void Chain(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default action: restore it and raise again. The raised signal is delivered when
  // this handler returns (a fault would also simply fault again), and kills the process.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

// Replaces the faulting page of a registered range with zeros; true when it was ours.
bool Absorb(uintptr_t addr) {
  const size_t high = g_high.load(std::memory_order_acquire);
  for (size_t i = 0; i < high; ++i) {
    Entry& e = g_entries[i];
    const uintptr_t begin = e.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= e.end.load(std::memory_order_acquire)) continue;
    std::atomic<uint64_t>* first = e.first_fault.load(std::memory_order_acquire);
    const uintptr_t page = addr & ~(g_page - 1);
    void* zeros =
        mmap(reinterpret_cast<void*>(page), g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (zeros == MAP_FAILED || first == nullptr) return false;
    uint64_t none = UINT64_MAX;
    first->compare_exchange_strong(none, page > begin ? page - begin : 0, std::memory_order_acq_rel);
    return true;
  }
  return false;
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // si_code > 0: raised by the kernel for a memory access, so si_addr is the faulting address.
  const bool ours = info != nullptr && info->si_code > 0 && Absorb(reinterpret_cast<uintptr_t>(info->si_addr));
  errno = saved_errno;
  if (!ours) Chain(sig, info, context);
}

Status Install() {
  const long page = sysconf(_SC_PAGESIZE);
  if (page > 0) g_page = static_cast<uintptr_t>(page);
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGBUS, &action, &g_previous) != 0) {
    return Internal(std::string("cannot install the SIGBUS handler: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status EnsureInstalled() {
  static std::once_flag once;
  static Status installed;
  std::call_once(once, [] { installed = Install(); });
  return installed;
}

}  // namespace

Result<std::unique_ptr<FaultGuard>> FaultGuard::Register(const void* base, uint64_t size) {
  RETURN_IF_ERROR(EnsureInstalled());
  std::unique_ptr<FaultGuard> guard(new FaultGuard());
  for (size_t i = 0; i < kMaxGuardedMappings; ++i) {
    bool free = false;
    if (!g_entries[i].used.compare_exchange_strong(free, true, std::memory_order_acq_rel)) continue;
    Entry& e = g_entries[i];
    const auto begin = reinterpret_cast<uintptr_t>(base);
    e.first_fault.store(&guard->first_fault_, std::memory_order_release);
    e.end.store(begin + size, std::memory_order_release);
    e.begin.store(begin, std::memory_order_release);
    size_t high = g_high.load(std::memory_order_acquire);
    while (high < i + 1 && !g_high.compare_exchange_weak(high, i + 1, std::memory_order_acq_rel)) {
    }
    guard->slot_ = i;
    return guard;
  }
  return ResourceExhausted("more than " + std::to_string(kMaxGuardedMappings) +
                           " files are mapped at once; lower max_open_shards or read with pread");
}

FaultGuard::~FaultGuard() {
  Entry& e = g_entries[slot_];
  e.begin.store(0, std::memory_order_release);
  e.end.store(0, std::memory_order_release);
  e.first_fault.store(nullptr, std::memory_order_release);
  e.used.store(false, std::memory_order_release);
}

}  // namespace shardify::detail
