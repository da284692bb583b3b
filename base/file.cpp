#include "base/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/fault_internal.h"
#include "base/strings.h"

namespace shardify {

namespace {
Status Errno(const std::string& what, const std::string& path) {
  return IOError(what + " " + path + ": " + std::strerror(errno));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

constexpr size_t kWriteBuffer = 1 << 20;

// Opens `path` read-only and returns the descriptor and the size of a regular file.
Result<std::pair<int, uint64_t>> OpenForReading(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return Errno("cannot open", path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Errno("cannot stat", path);
  if (!S_ISREG(st.st_mode)) return IOError(path + ": not a regular file");
  return std::make_pair(fd.release(), static_cast<uint64_t>(st.st_size));
}

}  // namespace

MappedFile::MappedFile(std::string path, const uint8_t* data, uint64_t size)
    : path_(std::move(path)), data_(data), size_(size) {}

MappedFile::~MappedFile() {
  guard_.reset();  // unregistered before the range goes away
  if (data_ != nullptr && size_ > 0) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(const auto opened, OpenForReading(path));
  Fd fd(opened.first);
  const uint64_t size = opened.second;
  std::unique_ptr<MappedFile> file(new MappedFile(path, nullptr, 0));
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return Errno("cannot map", path);
    file->data_ = static_cast<const uint8_t*>(p);
    file->size_ = size;
    Result<std::unique_ptr<detail::FaultGuard>> guard = detail::FaultGuard::Register(p, size);
    if (!guard.ok()) return guard.status().WithContext("cannot map " + path);
    file->guard_ = std::move(guard).value();
  }
  return file;
}

bool MappedFile::faulted() const { return guard_ != nullptr && guard_->faulted(); }

Status MappedFile::FaultStatus() const {
  if (!faulted()) return Status::Ok();
  return IOError(path_ + ": reading the mapped file failed at offset " + std::to_string(guard_->first_fault()) +
                 " of " + std::to_string(size_) +
                 ": it was truncated or rewritten after it was opened, or the file "
                 "system could not read it");
}

ReadableFile::~ReadableFile() { ::close(fd_); }

Result<std::unique_ptr<ReadableFile>> ReadableFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(const auto opened, OpenForReading(path));
  return std::unique_ptr<ReadableFile>(new ReadableFile(path, opened.first, opened.second));
}

Status ReadableFile::Read(uint64_t offset, uint64_t size, void* dst) const {
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, out + done, static_cast<size_t>(std::min<uint64_t>(size - done, 1u << 30)),
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot read " + std::to_string(size) + " bytes at offset " + std::to_string(offset) + " of", path_);
    }
    if (n == 0) {
      return IOError(path_ + ": the file ends at offset " + std::to_string(offset + done) + ", reading " +
                     std::to_string(size) + " bytes at " + std::to_string(offset) +
                     ": it was truncated after it was opened");
    }
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

WritableFile::WritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) { buf_.reserve(kWriteBuffer); }

WritableFile::~WritableFile() { Close().IgnoreError(); }

Result<std::unique_ptr<WritableFile>> WritableFile::Create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path);
  return std::unique_ptr<WritableFile>(new WritableFile(path, fd));
}

Status WritableFile::Flush() {
  size_t done = 0;
  while (done < buf_.size()) {
    ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path_);
    }
    done += static_cast<size_t>(n);
  }
  buf_.clear();
  return Status::Ok();
}

Status WritableFile::Append(const void* data, size_t size) {
  if (fd_ < 0) return Internal(path_ + ": append after close");
  const auto* p = static_cast<const uint8_t*>(data);
  size_ += size;
  if (buf_.size() + size > kWriteBuffer) RETURN_IF_ERROR(Flush());
  if (size >= kWriteBuffer) {
    buf_.assign(p, p + size);
    return Flush();
  }
  buf_.insert(buf_.end(), p, p + size);
  return Status::Ok();
}

Status WritableFile::AppendZeros(size_t count) {
  static const uint8_t kZeros[256] = {};
  while (count > 0) {
    const size_t n = std::min(count, sizeof kZeros);
    RETURN_IF_ERROR(Append(kZeros, n));
    count -= n;
  }
  return Status::Ok();
}

Status WritableFile::Sync() {
  RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) return Errno("cannot fsync", path_);
  return Status::Ok();
}

Status WritableFile::Close() {
  if (fd_ < 0) return Status::Ok();
  Status s = Flush();
  if (::close(fd_) != 0 && s.ok()) s = Errno("cannot close", path_);
  fd_ = -1;
  return s;
}

namespace {

bool SameFile(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// The process id a lock file's holder wrote, or "" when it cannot be read.
std::string HolderOf(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.find_first_not_of("0123456789") == std::string::npos ? pid : "";
}

}  // namespace

Result<std::unique_ptr<FileLock>> FileLock::Acquire(const std::string& path) {
  // A holder removes the file when it is done; a lock taken on a file that was removed (or
  // replaced) meanwhile protects nothing, so it is dropped and taken again on the new file.
  for (int attempt = 0; attempt < 100; ++attempt) {
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Errno("cannot create lock file", path);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return Errno("cannot lock", path);
      const std::string pid = HolderOf(fd.get());
      return Busy(path + " is locked by " + (pid.empty() ? std::string("another process") : "process " + pid));
    }
    struct stat held, now;
    if (::fstat(fd.get(), &held) != 0) return Errno("cannot stat", path);
    if (::stat(path.c_str(), &now) != 0 || !SameFile(held, now)) continue;
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), pid.data(), pid.size(), 0) < 0) {
      return Errno("cannot write lock file", path);
    }
    return std::unique_ptr<FileLock>(new FileLock(path, fd.release()));
  }
  return Busy(path + ": the lock file keeps being replaced by other processes");
}

FileLock::~FileLock() {
  struct stat held, now;
  if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &now) == 0 && SameFile(held, now)) {
    ::unlink(path_.c_str());  // still ours: removed while locked, so no one takes a dead file
  }
  ::close(fd_);
}

Status ExchangePaths(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return Status::Ok();
  if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == ENOTSUP) {
    return Unsupported("cannot exchange " + a + " and " + b + " atomically: " + std::strerror(errno));
  }
  return Errno("cannot exchange " + a + " and", b);
}

Result<std::pair<uint64_t, uint64_t>> FileId(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return Errno("cannot stat", path);
  }
  return std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path, uint64_t max_size) {
  ASSIGN_OR_RETURN(auto file, ReadableFile::Open(path));
  if (file->size() > max_size)
    return ResourceExhausted(path + ": " + std::to_string(file->size()) + " bytes exceeds the limit of " +
                             std::to_string(max_size));
  std::vector<uint8_t> bytes(file->size());
  RETURN_IF_ERROR(file->Read(0, bytes.size(), bytes.data()));
  return bytes;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool IsRelativeName(std::string_view name) {
  for (size_t at = 0;;) {
    const size_t slash = name.find('/', at);
    const std::string_view part = name.substr(at, slash == std::string_view::npos ? slash : slash - at);
    if (part.empty() || part == "." || part == "..") return false;
    for (const char c : part) {
      if (c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return false;
    }
    if (slash == std::string_view::npos) return true;
    at = slash + 1;
  }
}

Result<std::string> JoinRelative(const std::string& dir, const std::string& name) {
  if (!IsRelativeName(name)) {
    return InvalidArgument("'" + EscapeNonUtf8(name, true) + "' is not a relative name inside " + dir +
                           " (it is empty, has an empty, '.' or '..' part, a '/' at an end, a '\\' or a control "
                           "character)");
  }
  return JoinPath(dir, name);
}

namespace {
std::string ParentDir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
}  // namespace

Status WriteFileAtomic(const std::string& path, const void* data, size_t size, bool fsync) {
  const std::string tmp = path + ".tmp";
  {
    ASSIGN_OR_RETURN(auto file, WritableFile::Create(tmp));
    Status s = file->Append(data, size);
    if (s.ok() && fsync) s = file->Sync();
    if (s.ok()) s = file->Close();
    if (!s.ok()) {
      RemoveFile(tmp).IgnoreError();
      return s;
    }
  }
  Status s = RenameFile(tmp, path);
  if (!s.ok()) {
    RemoveFile(tmp).IgnoreError();
    return s;
  }
  return fsync ? FsyncDir(ParentDir(path)) : Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("cannot open directory", dir);
  if (::fsync(fd.get()) != 0) return Errno("cannot fsync directory", dir);
  return Status::Ok();
}

Status RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return Errno("cannot rename " + from + " to", to);
  return Status::Ok();
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove", path);
  return Status::Ok();
}

Status RemoveEmptyDir(const std::string& path) {
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove directory", path);
  return Status::Ok();
}

Result<uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return Errno("cannot stat", path);
  }
  return static_cast<uint64_t>(st.st_size);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsSymlink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

Status MakeDirs(const std::string& dir) {
  if (dir.empty() || IsDirectory(dir)) return Status::Ok();
  const std::string parent = ParentDir(dir);
  if (parent != dir && parent != "." && parent != "/") RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Errno("cannot create directory", dir);
  if (!IsDirectory(dir)) return IOError(dir + ": exists and is not a directory");
  return Status::Ok();
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) {
    if (errno == ENOENT) return NotFound(dir + ": no such directory");
    return Errno("cannot list", dir);
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t OpenFileLimit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace shardify
