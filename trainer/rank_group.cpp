// RankGroup: c10d's TCPStore and backend (Gloo, NCCL) behind the few calls Train makes.
//
// Compiles against LibTorch 1.13 (where the backends derive from c10d::ProcessGroup) and
// 2.x (c10d::Backend). Uses only calls both have: TCPStore(host, TCPStoreOptions),
// PrefixStore, Store::{set, get, add, check}, ProcessGroupGloo(store, rank, size, options)
// with Options::create(timeout) and createDeviceFor{Interface,Hostname}/createDefaultDevice,
// ProcessGroupNCCL(store, rank, size, options), and {allreduce, broadcast, barrier} -> Work::wait.
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <limits>
#include <memory>
#include <thread>

#include "trainer/distributed_internal.h"

#ifndef SHARDIFY_NO_C10D
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#ifdef SHARDIFY_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef SHARDIFY_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#endif

namespace shardify::trainer::detail {

#ifdef SHARDIFY_NO_C10D

struct RankGroup::Impl {};
RankGroup::RankGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RankGroup::~RankGroup() = default;
Result<std::unique_ptr<RankGroup>> RankGroup::Join(const DistributedOptions&, const torch::Device&) {
  return Unsupported(
      "this shardtrain was built against a LibTorch without c10d (torch.distributed); "
      "it trains in one process only");
}
int RankGroup::rank() const { return 0; }
int RankGroup::world_size() const { return 1; }
std::string RankGroup::backend_name() const { return ""; }
Status RankGroup::SumInPlace(std::vector<torch::Tensor>&, const std::string&) { return Status::Ok(); }
Result<std::vector<double>> RankGroup::Sum(const std::vector<double>& v, const std::string&) { return v; }
Status RankGroup::Broadcast(std::vector<torch::Tensor>&, const std::string&) { return Status::Ok(); }
Status RankGroup::Barrier(const std::string&) { return Status::Ok(); }
void RankGroup::StartSum(const torch::Tensor&, const std::string&) {}
Status RankGroup::WaitAll() { return Status::Ok(); }
Status RankGroup::Agree(const AgreedValues&) { return Status::Ok(); }
void RankGroup::Leave(const Status&) {}
Status RankGroup::Finish() { return Status::Ok(); }

#else

namespace {

using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

Ms Millis(double seconds) { return Ms(static_cast<int64_t>(seconds * 1000.0)); }

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// Runs `f` on a thread of its own: true when it returned within `seconds`; one that has not
// is left to finish (or wait) on its own, holding what `f` holds. A store call can wait
// without end: LibTorch 1.13's TCPStore server reads each message to its end, so a rank
// stopped, or cut off, in the middle of one leaves the server waiting and every other
// call on it unanswered. The calls made on the way out of a run go through here.
bool Bounded(double seconds, std::function<void()> f) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread t([f = std::move(f), done] {
    f();
    done->set_value();
  });
  if (finished.wait_for(Ms(static_cast<int64_t>(seconds * 1000.0))) == std::future_status::ready) {
    t.join();
    return true;
  }
  t.detach();
  return false;
}

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

using StorePtr = c10::intrusive_ptr<c10d::Store>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string Text(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

std::string Key(const char* what, int rank) { return std::string("shardtrain/") + what + "/" + std::to_string(rank); }

// A connection to the store; `server`: host it here (rank 0 without an agent store).
// Under a launcher's agent store, keys live under "/worker/attempt_<restart>" as torchrun's
// workers use them.
StorePtr OpenStore(const DistributedOptions& o, bool server) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(o.master_port);
  so.isServer = server;
  so.waitWorkers = false;
  so.timeout = Millis(o.timeout_s);
  StorePtr tcp = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
  if (!o.agent_store) return tcp;
  return c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(o.restart_count), tcp);
}

#ifdef SHARDIFY_HAVE_GLOO
bool IsLoopback(const std::string& host) { return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0; }
#endif

Result<c10::intrusive_ptr<BackendBase>> MakeBackend(const DistributedOptions& o, const torch::Device& device,
                                                    const StorePtr& store, std::string* name) {
  const StorePtr pg_store = c10::make_intrusive<c10d::PrefixStore>("shardtrain/pg", store);
  const bool nccl = o.backend == "nccl" || (o.backend == "auto" && device.is_cuda());
#ifdef SHARDIFY_HAVE_NCCL
  if (nccl) {
    if (!device.is_cuda()) return InvalidArgument("backend nccl needs a CUDA device (--device cuda)");
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = Millis(o.timeout_s);
    *name = "nccl";
    return c10::intrusive_ptr<BackendBase>(
        c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, o.rank, o.world_size, opts));
  }
#else
  if (nccl && o.backend == "nccl") {
    return Unsupported(
        "this shardtrain was built without c10d's NCCL backend (needs a CUDA LibTorch 2.x and "
        "nccl.h at build time); use --dist-backend gloo");
  }
#endif
#ifdef SHARDIFY_HAVE_GLOO
  auto opts = c10d::ProcessGroupGloo::Options::create(Millis(o.timeout_s));
  if (!o.interface.empty()) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(o.interface));
  } else if (IsLoopback(o.master_addr)) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  *name = "gloo";
  return c10::intrusive_ptr<BackendBase>(
      c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, o.rank, o.world_size, opts));
#else
  (void)pg_store;
  (void)name;
  return Unsupported(
      "this shardtrain was built without c10d's Gloo backend (gloo/*.h was not found at build "
      "time; Debian: libgloo-dev)");
#endif
}

// What the store calls share: a call left waiting on the store (Bounded) holds this, so it
// outlives the group when it must.
struct StoreSide {
  DistributedOptions o;
  StorePtr store;                        // the group's connection
  StorePtr monitor_store;                // the heartbeat thread's own
  std::atomic<uint64_t> collectives{0};  // started by this rank (published as its progress)
  std::mutex mu;                         // stop
  std::condition_variable cv;
  bool stop = false;
  std::atomic<bool> unanswered{false};  // a call went unanswered: the rest are not waited for

  // Heartbeat period, and how long a silent rank must stay silent to be named.
  double interval() const { return std::clamp(o.timeout_s / 30.0, 0.05, 1.0); }
  double window() const { return 3 * interval(); }
  // How long a store that answers at all takes to answer a call.
  double answer_s() const { return std::clamp(o.timeout_s, 1.0, 10.0); }
  std::string where() const { return o.master_addr + ":" + std::to_string(o.master_port); }

  void Beat();
  std::string Culprit();
  // A store that does not answer: its server left waiting on a half-sent message (see
  // Bounded), or, hosted by rank 0 here, gone with rank 0.
  std::string Unanswered() const {
    if (o.agent_store) return "the launcher's store at " + where() + " does not answer";
    const std::string cut = "a rank stopped, or lost its connection, in the middle of a message to it";
    if (o.rank == 0) return "the store this rank hosts at " + where() + " does not answer: " + cut;
    return "the store rank 0 hosts at " + where() + " does not answer: rank 0 is gone, or " + cut;
  }
};

// The heartbeat thread: this rank's heartbeat and progress, for the others to read when a
// collective fails. It stops quietly when the store goes away (rank 0 leaving at the end).
void StoreSide::Beat() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stop) {
    lock.unlock();
    try {
      monitor_store->add(Key("beat", o.rank), 1);
      monitor_store->set(Key("progress", o.rank), Bytes(std::to_string(collectives.load())));
    } catch (const std::exception&) {
      return;
    }
    lock.lock();
    cv.wait_for(lock, Millis(interval()), [this] { return stop; });
  }
}

// Which rank is at fault, read from the store: one that said why it left, one whose
// heartbeat stopped, or one that never started the collective that failed.
std::string StoreSide::Culprit() {
  const int n = o.world_size;
  try {
    auto reported = [&]() -> std::string {
      for (int q = 0; q < n; ++q) {
        if (q != o.rank && store->check({Key("failed", q)})) {
          return "rank " + std::to_string(q) + " stopped: " + Text(store->get(Key("failed", q)));
        }
      }
      return "";
    };
    std::string why = reported();
    if (!why.empty()) return why;
    std::vector<int64_t> before(n), after(n);
    for (int q = 0; q < n; ++q) before[q] = store->add(Key("beat", q), 0);
    std::this_thread::sleep_for(Millis(window()));
    if (!(why = reported()).empty()) return why;
    std::vector<int> silent;
    for (int q = 0; q < n; ++q) {
      after[q] = store->add(Key("beat", q), 0);
      if (q != o.rank && after[q] == before[q]) silent.push_back(q);
    }
    if (!silent.empty()) {
      // Every rank beats once per interval() from the rendezvous on: the beats a silent rank
      // is behind this one tell how long it has been silent, often far longer than the
      // window watched here (a stopped rank, found when the collective times out).
      double silent_s = std::numeric_limits<double>::infinity();
      for (int q : silent) silent_s = std::min(silent_s, double(after[o.rank] - after[q]) * interval());
      silent_s = std::max(silent_s, window());
      char secs[32];
      std::snprintf(secs, sizeof secs, silent_s < 10 ? "%.1f" : "%.0f", silent_s);
      return "rank " + RankList(silent) + " gave no sign of life for about " + secs +
             " s (killed, stopped, or its machine is unreachable)";
    }
    const uint64_t mine = collectives.load();
    for (int q = 0; q < n; ++q) {
      if (q == o.rank || !store->check({Key("progress", q)})) continue;
      const uint64_t theirs = std::strtoull(Text(store->get(Key("progress", q))).c_str(), nullptr, 10);
      if (theirs < mine) {
        return "rank " + std::to_string(q) + " is alive but has not reached this collective (it started " +
               std::to_string(theirs) + " collectives, this rank " + std::to_string(mine) +
               "): it hangs, or is slower than --dist-timeout";
      }
    }
    return "every rank is alive and reached this collective";
  } catch (const std::exception&) {
    return Unanswered();
  }
}

}  // namespace

struct RankGroup::Impl {
  std::shared_ptr<StoreSide> side = std::make_shared<StoreSide>();
  const DistributedOptions& o = side->o;
  torch::Device backend_device{torch::kCPU};  // where the backend wants its tensors
  std::string backend_name;
  c10::intrusive_ptr<BackendBase> backend;

  struct Pending {
    WorkPtr work;
    torch::Tensor target, staged;
    std::string what;
  };
  std::mutex mu;  // pending, async_error
  std::vector<Pending> pending;
  std::string async_error, async_what;

  std::thread monitor;
  bool done = false;  // Finish or Leave ran
  bool left = false;  // Leave ran

  // The backend first (it holds the store too), then the store, within a bound: a server
  // left waiting on a half-sent message does not stop. A call still waiting on the store
  // holds it as well; it goes with the last holder. Also when joining failed.
  ~Impl() {
    backend.reset();
    const double bound = side->unanswered ? 0.0 : side->answer_s();
    Bounded(bound, [s = std::move(side)]() mutable { s.reset(); });
  }

  // `f`, a store call, within `seconds` (see Bounded); none once one went unanswered.
  bool StoreCall(double seconds, std::function<void()> f);
  void StopMonitor();
  Status Announce();
  Status AwaitKey(const std::string& key, int from, double timeout_s);
  // StoreSide::Culprit within a bound: a store that does not answer is the culprit then.
  std::string Culprit();
  Status Failed(const std::string& what, const std::string& error);
  // Runs `collective` on each tensor in turn (staged on the backend's device and back),
  // waiting for each; an error names the rank at fault.
  Status Each(std::vector<torch::Tensor>& tensors, const std::string& what,
              const std::function<WorkPtr(std::vector<at::Tensor>&)>& collective);
};

bool RankGroup::Impl::StoreCall(double seconds, std::function<void()> f) {
  if (Bounded(side->unanswered ? 0.0 : seconds, std::move(f))) return true;
  side->unanswered = true;
  return false;
}

void RankGroup::Impl::StopMonitor() {
  if (!monitor.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(side->mu);
    side->stop = true;
  }
  side->cv.notify_all();
  auto beating = std::make_shared<std::thread>(std::move(monitor));
  StoreCall(side->answer_s(), [beating] { beating->join(); });
}

// Every rank claims its rank and announces itself; then each waits for all the others.
Status RankGroup::Impl::Announce() {
  const int r = o.rank, n = o.world_size;
  StorePtr& store = side->store;
  if (store->add(Key("claim", r), 1) > 1) {
    return InvalidArgument("rank " + std::to_string(r) + " is claimed by two processes (RANK set the same twice?)");
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  store->set(Key("rank", r), Bytes(std::to_string(n) + " " + host + " pid " + std::to_string(getpid())));
  const auto deadline = Clock::now() + Millis(o.timeout_s);
  std::vector<int> missing;
  while (true) {
    missing.clear();
    for (int q = 0; q < n; ++q) {
      if (!store->check({Key("rank", q)})) missing.push_back(q);
    }
    if (missing.empty()) break;
    if (Clock::now() > deadline) {
      return IOError("rank(s) " + RankList(missing) + " of " + std::to_string(n) + " did not join within " +
                     std::to_string(int(o.timeout_s)) + " s (store at " + side->where() + ")");
    }
    std::this_thread::sleep_for(Ms(20));
  }
  for (int q = 0; q < n; ++q) {
    const std::string v = Text(store->get(Key("rank", q)));
    if (v.substr(0, v.find(' ')) != std::to_string(n)) {
      return InvalidArgument("rank " + std::to_string(q) + " (" + v.substr(v.find(' ') + 1) +
                             ") was started with WORLD_SIZE " + v.substr(0, v.find(' ')) + ", this rank with " +
                             std::to_string(n));
    }
  }
  return Status::Ok();
}

// Waits until `key`, which rank `from` sets, is in the store; an error once `from` has
// said why it left, or after `timeout_s`.
Status RankGroup::Impl::AwaitKey(const std::string& key, int from, double timeout_s) {
  const auto deadline = Clock::now() + Millis(timeout_s);
  StorePtr& store = side->store;
  while (!store->check({key})) {
    if (store->check({Key("failed", from)})) {
      return IOError("rank " + std::to_string(from) + " stopped: " + Text(store->get(Key("failed", from))));
    }
    if (Clock::now() > deadline) {
      return IOError("rank " + std::to_string(from) + " did not compare its options within " +
                     std::to_string(int(timeout_s)) + " s: " + Culprit());
    }
    std::this_thread::sleep_for(Ms(20));
  }
  return Status::Ok();
}

std::string RankGroup::Impl::Culprit() {
  std::shared_ptr<StoreSide> s = side;
  auto text = std::make_shared<std::string>();
  if (StoreCall(s->window() + s->answer_s(), [s, text] { *text = s->Culprit(); })) return *text;
  return s->Unanswered();
}

Status RankGroup::Impl::Failed(const std::string& what, const std::string& error) {
  return IOError(what + " across " + std::to_string(o.world_size) + " ranks failed on rank " + std::to_string(o.rank) +
                 ": " + Culprit() + " [" + backend_name + ": " + FirstLine(error) + "]");
}

Status RankGroup::Impl::Each(std::vector<torch::Tensor>& tensors, const std::string& what,
                             const std::function<WorkPtr(std::vector<at::Tensor>&)>& collective) {
  try {
    for (torch::Tensor& t : tensors) {
      std::vector<at::Tensor> one = {t.to(backend_device).contiguous()};
      ++side->collectives;
      collective(one)->wait();
      if (!one[0].is_same(t)) t.copy_(one[0]);
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return Failed(what, e.what());
  }
}

RankGroup::RankGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RankGroup::~RankGroup() {
  if (!impl_->done) Leave(Internal("it stopped without finishing the run"));
  impl_->StopMonitor();
  impl_->backend.reset();  // the others' collectives fail now
  if (impl_->left && impl_->o.rank == 0 && !impl_->o.agent_store) {
    // This process hosts the store: keep it a moment, for the others to read why it left.
    std::this_thread::sleep_for(Millis(std::clamp(2 * impl_->side->window(), 1.0, 5.0)));
  }
}

Result<std::unique_ptr<RankGroup>> RankGroup::Join(const DistributedOptions& o, const torch::Device& device) {
  auto impl = std::make_unique<Impl>();
  StoreSide& side = *impl->side;
  side.o = o;
  const bool server = o.rank == 0 && !o.agent_store;
  try {
    side.store = OpenStore(o, server);
  } catch (const std::exception& e) {
    return IOError(std::string(server ? "cannot host" : "cannot reach") + " the rendezvous store at " + side.where() +
                   " (MASTER_ADDR:MASTER_PORT) as rank " + std::to_string(o.rank) + ": " + FirstLine(e.what()));
  }
  try {
    RETURN_IF_ERROR(impl->Announce());
    side.monitor_store = OpenStore(o, false);
    ASSIGN_OR_RETURN(impl->backend, MakeBackend(o, device, side.store, &impl->backend_name));
  } catch (const std::exception& e) {
    return IOError("joining the process group as rank " + std::to_string(o.rank) + " of " +
                   std::to_string(o.world_size) + " (store at " + side.where() + "): " + FirstLine(e.what()));
  }
  impl->backend_device = impl->backend_name == "nccl" ? device : torch::Device(torch::kCPU);
  impl->monitor = std::thread([s = impl->side] { s->Beat(); });
  return std::unique_ptr<RankGroup>(new RankGroup(std::move(impl)));
}

int RankGroup::rank() const { return impl_->o.rank; }
int RankGroup::world_size() const { return impl_->o.world_size; }
std::string RankGroup::backend_name() const { return impl_->backend_name; }

Status RankGroup::SumInPlace(std::vector<torch::Tensor>& tensors, const std::string& what) {
  return impl_->Each(tensors, what, [this](std::vector<at::Tensor>& one) { return impl_->backend->allreduce(one); });
}

Result<std::vector<double>> RankGroup::Sum(const std::vector<double>& values, const std::string& what) {
  std::vector<torch::Tensor> t = {torch::tensor(values, torch::kDouble)};
  RETURN_IF_ERROR(SumInPlace(t, what));
  const torch::Tensor c = t[0].contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

Status RankGroup::Broadcast(std::vector<torch::Tensor>& tensors, const std::string& what) {
  return impl_->Each(tensors, what, [this](std::vector<at::Tensor>& one) { return impl_->backend->broadcast(one); });
}

Status RankGroup::Barrier(const std::string& what) {
  // A barrier is an all-reduce of one element on the backend's device (NCCL's own barrier
  // guesses the device from the rank).
  std::vector<torch::Tensor> one = {torch::zeros({1}, torch::TensorOptions().device(impl_->backend_device))};
  return SumInPlace(one, what);
}

void RankGroup::StartSum(const torch::Tensor& flat, const std::string& what) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->async_error.empty()) return;
  try {
    Impl::Pending p;
    p.target = flat;
    p.staged = flat.to(impl_->backend_device);
    p.what = what;
    std::vector<at::Tensor> one = {p.staged};
    ++impl_->side->collectives;
    p.work = impl_->backend->allreduce(one);
    impl_->pending.push_back(std::move(p));
  } catch (const std::exception& e) {
    impl_->async_error = e.what();
    impl_->async_what = what;
  }
}

Status RankGroup::WaitAll() {
  std::vector<Impl::Pending> pending;
  std::string error, what;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    pending.swap(impl_->pending);
    error.swap(impl_->async_error);
    what.swap(impl_->async_what);
  }
  for (Impl::Pending& p : pending) {
    if (!error.empty()) break;
    try {
      p.work->wait();
      if (!p.staged.is_same(p.target)) p.target.copy_(p.staged);
    } catch (const std::exception& e) {
      error = e.what();
      what = p.what;
    }
  }
  return error.empty() ? Status::Ok() : impl_->Failed(what, error);
}

namespace {

// "name\0value\0" for each pair.
std::string EncodeValues(const AgreedValues& values) {
  std::string out;
  for (const auto& [name, value] : values) out += name + '\0' + value + '\0';
  return out;
}

AgreedValues DecodeValues(const std::string& text) {
  AgreedValues out;
  for (size_t at = 0; at < text.size();) {
    const size_t name_end = text.find('\0', at), value_end = text.find('\0', name_end + 1);
    if (name_end == std::string::npos || value_end == std::string::npos) break;
    out.emplace_back(text.substr(at, name_end - at), text.substr(name_end + 1, value_end - name_end - 1));
    at = value_end + 1;
  }
  return out;
}

}  // namespace

// Every rank publishes its values; rank 0 compares each rank's with its own and publishes
// the verdict ("=" or "!" and what differs), which every rank returns.
Status RankGroup::Agree(const AgreedValues& values) {
  Impl& m = *impl_;
  const int n = m.o.world_size;
  try {
    m.side->store->set(Key("agree", m.o.rank), Bytes(EncodeValues(values)));
    std::string verdict = "=";
    if (m.o.rank == 0) {
      for (int q = 1; q < n && verdict == "="; ++q) {
        RETURN_IF_ERROR(m.AwaitKey(Key("agree", q), q, m.o.timeout_s));
        const std::string differs = Disagreement(values, DecodeValues(Text(m.side->store->get(Key("agree", q)))), q);
        if (!differs.empty()) verdict = "!" + differs;
      }
      m.side->store->set(Key("verdict", 0), Bytes(verdict));
    } else {
      RETURN_IF_ERROR(m.AwaitKey(Key("verdict", 0), 0, 2 * m.o.timeout_s));  // rank 0 waits for every rank first
      verdict = Text(m.side->store->get(Key("verdict", 0)));
    }
    return verdict == "=" ? Status::Ok() : InvalidArgument(verdict.substr(1));
  } catch (const std::exception& e) {
    return m.Failed("comparing the options", e.what());
  }
}

void RankGroup::Leave(const Status& why) {
  if (impl_->done) return;
  impl_->done = impl_->left = true;
  std::shared_ptr<StoreSide> s = impl_->side;
  impl_->StoreCall(s->answer_s(), [s, text = FirstLine(why.ToString())] {
    try {
      s->store->set(Key("failed", s->o.rank), Bytes(text));
    } catch (const std::exception&) {
      // The store is gone too; the others find out from their heartbeat check.
    }
  });
}

Status RankGroup::Finish() {
  Status s = Barrier("the final barrier");
  impl_->done = true;
  impl_->StopMonitor();
  return s;
}

#endif  // SHARDIFY_NO_C10D

}  // namespace shardify::trainer::detail
