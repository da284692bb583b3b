#include "storage/cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "base/file.h"
#include "base/strings.h"

namespace shardify::storage {
namespace {

// Temporary names: ".<key>.partial.<reserved bytes>.<pid>"; lock files end in ".lock".
constexpr const char* kPartial = ".partial.";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kCacheLock = ".cache.lock";
// A reader waiting for room looks again after kFirstPause, then twice as long each time.
constexpr std::chrono::duration<double> kFirstPause = std::chrono::milliseconds(1);
constexpr std::chrono::duration<double> kLongestPause = std::chrono::milliseconds(100);

Status Errno(const std::string& what, const std::string& path) {
  return IOError(what + " " + path + ": " + std::strerror(errno));
}

// An open descriptor holding a flock, closed (and so unlocked) on destruction.
class Locked {
 public:
  static Result<Locked> Exclusive(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("cannot open lock file", path);
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        ::close(fd);
        return Errno("cannot lock", path);
      }
    }
    return Locked(fd);
  }
  Locked(Locked&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Locked& operator=(Locked&&) = delete;
  ~Locked() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  explicit Locked(int fd) : fd_(fd) {}
  int fd_;
};

bool IsPartial(const std::string& name) { return name.find(kPartial) != std::string::npos; }
bool IsLock(const std::string& name) { return EndsWith(name, kLockSuffix) || name == kCacheLock; }

// The reserved size and process of a temporary name; false when the name is not one.
bool ParsePartial(const std::string& name, uint64_t* reserved, pid_t* pid) {
  const size_t at = name.rfind(kPartial);
  if (at == std::string::npos) return false;
  const std::string rest = name.substr(at + std::strlen(kPartial));
  const size_t dot = rest.find('.');
  if (dot == std::string::npos) return false;
  char* end = nullptr;
  *reserved = std::strtoull(rest.c_str(), &end, 10);
  *pid = static_cast<pid_t>(std::strtol(rest.c_str() + dot + 1, &end, 10));
  return true;
}

bool Alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

struct Entry {
  std::string name;
  uint64_t bytes = 0;
  struct timespec used {};
  ino_t inode = 0;
};

// The files of a cache folder (with its lock held): the complete ones, and the bytes that
// fetches under way have reserved. Temporary files of dead processes are removed.
struct Listing {
  std::vector<Entry> complete;
  uint64_t fetching = 0;
  uint64_t used() const {
    uint64_t sum = fetching;
    for (const Entry& e : complete) sum += e.bytes;
    return sum;
  }
};

Result<Listing> List(const std::string& dir) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(dir));
  Listing out;
  for (const std::string& name : names) {
    if (IsLock(name)) continue;
    const std::string path = JoinPath(dir, name);
    uint64_t reserved = 0;
    pid_t pid = 0;
    if (ParsePartial(name, &reserved, &pid)) {
      if (Alive(pid)) {
        out.fetching += reserved;
      } else {
        RemoveFile(path).IgnoreError();  // left by a process that died while fetching
      }
      continue;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.complete.push_back({name, static_cast<uint64_t>(st.st_size), st.st_mtim, st.st_ino});
  }
  return out;
}

// Whether the file `path` stays: a reader holds it (a shared flock on it, in any process).
// With `evict`, a file that no one holds is removed (under an exclusive lock, so that no
// reader takes it meanwhile; one that opened it before sees it unlinked and fetches it
// again), and one that cannot be removed stays.
bool Stays(const std::string& path, bool evict) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool stays = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  if (!stays && evict) stays = ::unlink(path.c_str()) != 0;
  ::close(fd);
  return stays;
}

// How many processes hold a shared flock on one of the files `inodes`, as /proc/locks
// lists them (Linux); 0 when it cannot tell. Inodes alone are matched: the device numbers
// there and in stat() differ on overlay file systems.
size_t Holders(const std::vector<ino_t>& inodes) {
  std::ifstream in("/proc/locks");
  std::set<long> pids;
  for (std::string line; std::getline(in, line);) {
    char kind[16], mode[16], access[16];
    long pid = 0;
    unsigned major = 0, minor = 0;
    unsigned long long inode = 0;
    // "1: FLOCK  ADVISORY  READ 4242 fe:00:1234 0 EOF"; a waiter's line has "->" before FLOCK.
    if (std::sscanf(line.c_str(), "%*d: %15s %15s %15s %ld %x:%x:%llu", kind, mode, access, &pid, &major, &minor,
                    &inode) != 7) {
      continue;
    }
    if (std::strcmp(kind, "FLOCK") != 0 || std::strcmp(access, "READ") != 0) continue;
    if (std::find(inodes.begin(), inodes.end(), static_cast<ino_t>(inode)) != inodes.end()) pids.insert(pid);
  }
  return pids.size();
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

CachedFile::~CachedFile() { ::close(fd_); }

Result<std::shared_ptr<Cache>> Cache::Open(const std::string& dir, uint64_t limit_bytes, double wait_s) {
  if (limit_bytes == 0) return InvalidArgument("cache " + dir + ": the size limit must be at least 1 byte");
  if (!(wait_s >= 0)) return InvalidArgument("cache " + dir + ": the wait for room must be 0 s or more");
  RETURN_IF_ERROR(MakeDirs(dir));
  return std::shared_ptr<Cache>(new Cache(dir, limit_bytes, wait_s));
}

Result<std::shared_ptr<const CachedFile>> Cache::Hold(const std::string& key, uint64_t size) const {
  const std::string path = JoinPath(dir_, key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::shared_ptr<const CachedFile>();
    return Errno("cannot open cached file", path);
  }
  std::shared_ptr<const CachedFile> held(new CachedFile(path, size, fd));
  while (::flock(fd, LOCK_SH) != 0) {
    if (errno != EINTR) return Errno("cannot lock cached file", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno("cannot stat cached file", path);
  if (st.st_nlink == 0) return std::shared_ptr<const CachedFile>();  // evicted before the lock: fetch again
  if (static_cast<uint64_t>(st.st_size) != size) {
    return Corruption(path + ": the cached file is " + std::to_string(st.st_size) + " bytes, not " +
                      std::to_string(size) + "; remove it");
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // most recently used
  return held;
}

Result<std::string> Cache::Reserve(const std::string& key, uint64_t size) const {
  ASSIGN_OR_RETURN(Listing now, List(dir_));
  uint64_t used = now.used();
  std::sort(now.complete.begin(), now.complete.end(), [](const Entry& a, const Entry& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const Entry& e : now.complete) {
    if (used + size <= limit_) break;
    if (!Stays(JoinPath(dir_, e.name), /*evict=*/true)) used -= e.bytes;
  }
  if (used + size > limit_) return ResourceExhausted("cache " + dir_ + ": no room for " + key);
  // One fetch of a key at a time (its lock), so process id and key make the name unique.
  const std::string tmp =
      JoinPath(dir_, "." + key + kPartial + std::to_string(size) + "." + std::to_string(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  ::close(fd);
  return tmp;
}

Status Cache::NoRoom(const std::string& key, uint64_t size, double waited_s) const {
  uint64_t held = 0, files = 0, fetching = 0;
  size_t readers = 0;
  {
    ASSIGN_OR_RETURN(Locked cache, Locked::Exclusive(JoinPath(dir_, kCacheLock)));
    ASSIGN_OR_RETURN(const Listing now, List(dir_));
    std::vector<ino_t> inodes;
    for (const Entry& e : now.complete) {
      if (!Stays(JoinPath(dir_, e.name), /*evict=*/false)) continue;  // no one holds it
      held += e.bytes;
      ++files;
      inodes.push_back(e.inode);
    }
    fetching = now.fetching;
    readers = Holders(inodes);
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f", waited_s);
  return ResourceExhausted(
      "cache " + dir_ + ": no room for " + key + " (" + std::to_string(size) + " bytes)" +
      (waited_s > 0 ? std::string(" after waiting ") + waited + " s" : std::string()) + ": the limit is " +
      std::to_string(limit_) + " bytes and " + std::to_string(held) + " bytes (" + Plural(files, "file", "files") +
      ") are held by " + (readers > 0 ? Plural(readers, "reader", "readers") : std::string("readers")) +
      (fetching > 0 ? ", " + std::to_string(fetching) + " bytes being fetched" : std::string()) +
      " (raise the cache limit, read fewer shards at once, or share the cache among fewer processes; a reader " +
      "waits SHARDIFY_CACHE_WAIT seconds for room, which readers that each hold files and wait for more never get)");
}

Status Cache::CheckKey(const std::string& key) const {
  if (key.empty() || key.find('/') != std::string::npos || key[0] == '.' || IsLock(key)) {
    return InvalidArgument("cache " + dir_ + ": bad key '" + key + "'");
  }
  return Status::Ok();
}

Result<std::shared_ptr<const CachedFile>> Cache::Find(const std::string& key, uint64_t size) const {
  RETURN_IF_ERROR(CheckKey(key));
  return Hold(key, size);
}

Result<std::shared_ptr<const CachedFile>> Cache::TryGet(const std::string& key, uint64_t size, const Fetch& fetch,
                                                        bool* no_room) const {
  for (int attempt = 0; attempt < 8; ++attempt) {
    ASSIGN_OR_RETURN(std::shared_ptr<const CachedFile> held, Hold(key, size));
    if (held) return held;
    // Not cached: fetch it, one process at a time per key.
    ASSIGN_OR_RETURN(Locked fetching, Locked::Exclusive(JoinPath(dir_, key + kLockSuffix)));
    ASSIGN_OR_RETURN(held, Hold(key, size));  // fetched by another process meanwhile
    if (held) return held;
    std::string tmp;
    {
      ASSIGN_OR_RETURN(Locked cache, Locked::Exclusive(JoinPath(dir_, kCacheLock)));
      Result<std::string> reserved = Reserve(key, size);
      *no_room = !reserved.ok() && reserved.status().code() == StatusCode::kResourceExhausted;
      ASSIGN_OR_RETURN(tmp, std::move(reserved));
    }
    Status fetched = fetch(tmp);
    if (fetched.ok()) {
      const Result<uint64_t> got = FileSize(tmp);
      if (!got.ok()) {
        fetched = got.status();
      } else if (*got != size) {
        fetched = IOError(key + ": fetched " + std::to_string(*got) + " bytes, expected " + std::to_string(size));
      }
    }
    if (fetched.ok()) fetched = RenameFile(tmp, JoinPath(dir_, key));
    if (!fetched.ok()) {
      RemoveFile(tmp).IgnoreError();
      return fetched;
    }
  }
  return IOError("cache " + dir_ + ": " + key + " keeps being evicted as soon as it is fetched");
}

Result<std::shared_ptr<const CachedFile>> Cache::Get(const std::string& key, uint64_t size, const Fetch& fetch,
                                                     WaitForRoom wait) const {
  RETURN_IF_ERROR(CheckKey(key));
  if (size > limit_) {
    return ResourceExhausted("cache " + dir_ + ": " + key + " is " + std::to_string(size) +
                             " bytes, more than the cache's limit of " + std::to_string(limit_));
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const std::chrono::duration<double> most(wait == WaitForRoom::kYes ? wait_s_ : 0);
  std::chrono::duration<double> pause = kFirstPause;
  while (true) {
    bool no_room = false;
    Result<std::shared_ptr<const CachedFile>> got = TryGet(key, size, fetch, &no_room);
    if (!no_room) return got;
    const std::chrono::duration<double> waited = Clock::now() - start;
    if (waited >= most) return NoRoom(key, size, most.count() > 0 ? waited.count() : 0);
    std::this_thread::sleep_for(std::min(pause, most - waited));  // readers release files meanwhile
    pause = std::min<std::chrono::duration<double>>(pause * 2, kLongestPause);
  }
}

Result<uint64_t> Cache::BytesUsed() const {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(dir_));
  uint64_t used = 0;
  for (const std::string& name : names) {
    if (IsLock(name) || IsPartial(name)) continue;
    const Result<uint64_t> size = FileSize(JoinPath(dir_, name));
    if (size.ok()) used += *size;
  }
  return used;
}

}  // namespace shardify::storage
