#include "storage/cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/file.h"
#include "base/strings.h"

namespace shardify::storage {
namespace {

// Temporary names: ".<key>.partial.<reserved bytes>.<pid>"; lock files end in ".lock".
constexpr const char* kPartial = ".partial.";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kCacheLock = ".cache.lock";

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
};

}  // namespace

CachedFile::~CachedFile() { ::close(fd_); }

Result<std::shared_ptr<Cache>> Cache::Open(const std::string& dir, uint64_t limit_bytes) {
  if (limit_bytes == 0) return InvalidArgument("cache " + dir + ": the size limit must be at least 1 byte");
  RETURN_IF_ERROR(MakeDirs(dir));
  return std::shared_ptr<Cache>(new Cache(dir, limit_bytes));
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
  if (size > limit_) {
    return ResourceExhausted("cache " + dir_ + ": " + key + " is " + std::to_string(size) +
                             " bytes, more than the cache's limit of " + std::to_string(limit_));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(dir_));
  std::vector<Entry> complete;
  uint64_t used = 0;
  for (const std::string& name : names) {
    if (IsLock(name)) continue;
    const std::string path = JoinPath(dir_, name);
    uint64_t reserved = 0;
    pid_t pid = 0;
    if (ParsePartial(name, &reserved, &pid)) {
      if (Alive(pid)) {
        used += reserved;
      } else {
        RemoveFile(path).IgnoreError();  // left by a process that died while fetching
      }
      continue;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    complete.push_back({name, static_cast<uint64_t>(st.st_size), st.st_mtim});
    used += static_cast<uint64_t>(st.st_size);
  }
  std::sort(complete.begin(), complete.end(), [](const Entry& a, const Entry& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  uint64_t held = 0;
  for (const Entry& e : complete) {
    if (used + size <= limit_) break;
    const std::string path = JoinPath(dir_, e.name);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {  // no one holds it
      if (::unlink(path.c_str()) == 0) used -= e.bytes;
    } else {
      held += e.bytes;
    }
    ::close(fd);
  }
  if (used + size > limit_) {
    return ResourceExhausted("cache " + dir_ + ": no room for " + key + " (" + std::to_string(size) +
                             " bytes): the limit is " + std::to_string(limit_) + " bytes and " + std::to_string(held) +
                             " bytes are held by readers (raise the cache limit, or read " +
                             "fewer shards at once, e.g. with the shard_windowed order)");
  }
  // One fetch of a key at a time (its lock), so process id and key make the name unique.
  const std::string tmp =
      JoinPath(dir_, "." + key + kPartial + std::to_string(size) + "." + std::to_string(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  ::close(fd);
  return tmp;
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

Result<std::shared_ptr<const CachedFile>> Cache::Get(const std::string& key, uint64_t size, const Fetch& fetch) const {
  RETURN_IF_ERROR(CheckKey(key));
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
      ASSIGN_OR_RETURN(tmp, Reserve(key, size));
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
