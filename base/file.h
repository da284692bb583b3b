// Files: RAII descriptors and mappings, buffered writes, atomic replacement, directory sync.
// Every function returns Status/Result; errors name the path and the errno text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace shardify {

namespace detail {
class FaultGuard;
}

// A read-only mapping of a whole file. Move-only through unique_ptr; unmapped on destruction.
// A read of a page the file no longer holds (it was truncated after Open, or the file
// system failed to read it) does not kill the process with SIGBUS: the page reads as
// zeros and faulted() turns true (base/fault_internal.h). Callers check it after reading.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // True once a read of the mapping faulted (see above). Cheap: one atomic load.
  bool faulted() const;
  // IOError naming the file and the offset of the first page that faulted; Ok when none did.
  Status FaultStatus() const;

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size);
  std::string path_;
  const uint8_t* data_;
  uint64_t size_;
  std::unique_ptr<detail::FaultGuard> guard_;  // null for an empty file
};

// A file read with pread(2), for file systems where page faults are slow or unsafe (NFS,
// FUSE). Read() may be called from any number of threads at once.
class ReadableFile {
 public:
  static Result<std::unique_ptr<ReadableFile>> Open(const std::string& path);
  ~ReadableFile();
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;
  uint64_t size() const { return size_; }  // when opened
  const std::string& path() const { return path_; }
  // Reads exactly `size` bytes at `offset` into dst. IOError naming the file when the
  // system call fails or the file ends before (it shrank since Open).
  Status Read(uint64_t offset, uint64_t size, void* dst) const;

 private:
  ReadableFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  uint64_t size_;
};

// A file opened for writing, with an in-memory buffer. Closed (not synced) on destruction.
class WritableFile {
 public:
  // Creates or truncates `path`.
  static Result<std::unique_ptr<WritableFile>> Create(const std::string& path);
  ~WritableFile();
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;
  Status Append(const void* data, size_t size);
  Status AppendZeros(size_t count);
  Status Sync();   // flushes the buffer and fsyncs
  Status Close();  // flushes and closes; idempotent
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  WritableFile(std::string path, int fd);
  Status Flush();
  std::string path_;
  int fd_;
  uint64_t size_ = 0;
  std::vector<uint8_t> buf_;
};

// An exclusive advisory lock (flock) on a lock file, taken without waiting. The kernel
// drops it with the descriptor, so it dies with its process, also after kill -9; the
// file itself may then remain, and the next Acquire takes it over. While held, the file
// holds the holder's process id (as text), which Acquire names when it is refused.
// Move-only through unique_ptr; destruction removes the file (when it is still the one
// locked) and releases the lock. Two FileLocks on one path conflict also within a process.
class FileLock {
 public:
  // Creates `path` when missing and locks it. A lock held elsewhere gives kBusy naming
  // the holder; other failures (no such directory, no lock support) give kIOError.
  static Result<std::unique_ptr<FileLock>> Acquire(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  const std::string& path() const { return path_; }
  // The file now lives at `path` (its directory was renamed); the destructor removes it there.
  void Moved(std::string path) { path_ = std::move(path); }

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

// Swaps two directories (or files) of one file system in one atomic step (Linux
// renameat2 RENAME_EXCHANGE). kUnsupported where the file system or kernel cannot.
Status ExchangePaths(const std::string& a, const std::string& b);
// (device, inode) of `path` without following a final symlink; NotFound when missing.
Result<std::pair<uint64_t, uint64_t>> FileId(const std::string& path);

// Reads a whole file (with read(2), no mapping); refuses one larger than max_size, and
// fails with IOError when it shrinks while being read.
Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path, uint64_t max_size);
// Writes `path` + ".tmp", optionally fsyncs it, renames it over `path`, then fsyncs the
// directory. Readers see the old file or the new one, never a mix.
Status WriteFileAtomic(const std::string& path, const void* data, size_t size, bool fsync = true);
Status FsyncDir(const std::string& dir);
Status RenameFile(const std::string& from, const std::string& to);
// Removes a file; a file that does not exist is not an error.
Status RemoveFile(const std::string& path);
// Removes an empty directory; one that does not exist is not an error.
Status RemoveEmptyDir(const std::string& path);
Result<uint64_t> FileSize(const std::string& path);
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
// Whether `path` itself is a symbolic link (lstat: the link, not what it names).
bool IsSymlink(const std::string& path);
// Creates `dir` and missing parents.
Status MakeDirs(const std::string& dir);
// Names in `dir` (not "." or ".."), sorted.
Result<std::vector<std::string>> ListDir(const std::string& dir);
std::string JoinPath(const std::string& dir, const std::string& name);
// Whether `name` is a relative path that stays inside any folder it is joined to: names
// between single '/', none of them empty, "." or "..", no '/' at either end, and no '\\'
// (a separator elsewhere), NUL or other control character (below 0x20, and 0x7F).
bool IsRelativeName(std::string_view name);
// JoinPath(dir, name) for a `name` that IsRelativeName; InvalidArgument naming both when it
// is not. Paths made from names that come from outside (an object store's listing) are
// made here and nowhere else.
Result<std::string> JoinRelative(const std::string& dir, const std::string& name);
// The process's soft limit on open file descriptors (RLIMIT_NOFILE); UINT64_MAX when unlimited.
uint64_t OpenFileLimit();

}  // namespace shardify
