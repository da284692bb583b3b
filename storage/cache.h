// A bounded local directory of fetched files, shared by the processes of a node.
//
// Every file enters the cache whole: it is fetched to a temporary name, checked, and
// renamed into place, so no reader ever sees a partial one. One process fetches a file at
// a time (the others wait for it and then use its copy). A held file (CachedFile alive,
// in this or any other process) is never evicted; the least recently used of the others
// go first when room is needed. The limit counts complete files and the full size of
// files being fetched, so processes that fetch at once stay within it together. When held
// files leave too little room, Get waits for readers to release some, for a bounded time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"

namespace shardify::storage {

// A file of the cache, held: it stays in place while this object lives (a shared
// flock on it, which eviction respects, across processes too).
class CachedFile {
 public:
  ~CachedFile();
  CachedFile(const CachedFile&) = delete;
  CachedFile& operator=(const CachedFile&) = delete;
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 private:
  friend class Cache;
  CachedFile(std::string path, uint64_t size, int fd) : path_(std::move(path)), size_(size), fd_(fd) {}
  std::string path_;
  uint64_t size_;
  int fd_;
};

// Whether Cache::Get waits for room when held files leave too little.
enum class WaitForRoom : bool { kNo, kYes };

class Cache {
 public:
  // Writes the file to the temporary path it is given (a new file there), or fails.
  using Fetch = std::function<Status(const std::string& path)>;

  // `dir` is created when missing. `limit_bytes` >= 1. `wait_s` (>= 0): how long Get
  // waits for room before it fails.
  static Result<std::shared_ptr<Cache>> Open(const std::string& dir, uint64_t limit_bytes, double wait_s = 0);

  // The file `key` (a plain file name) of `size` bytes, held while the returned object
  // lives. When it is not in the cache, room is made and `fetch` writes it; a fetched file
  // of another size, or a fetch that fails, never enters. When held files leave too little
  // room under the limit, it waits (kYes) for readers in any process to release files: it
  // sleeps and looks again, after 1 ms at first, then twice as long each time up to
  // 0.1 s, holding no lock meanwhile, for up to wait_s. Then, or at once with kNo,
  // ResourceExhausted names the folder, the limit, the bytes held and by how many
  // processes (readers that hold files while each waits for room end so). A file larger
  // than the limit is ResourceExhausted at once; the fetch's own error when it fails.
  // Thread-safe.
  Result<std::shared_ptr<const CachedFile>> Get(const std::string& key, uint64_t size, const Fetch& fetch,
                                                WaitForRoom wait = WaitForRoom::kYes) const;

  // The file `key` of `size` bytes, held, when the cache has it; null when it has not
  // (nothing is fetched). Errors as Get's.
  Result<std::shared_ptr<const CachedFile>> Find(const std::string& key, uint64_t size) const;

  // Bytes of the complete files in the cache now.
  Result<uint64_t> BytesUsed() const;
  const std::string& dir() const { return dir_; }
  uint64_t limit() const { return limit_; }
  double wait_s() const { return wait_s_; }

 private:
  Cache(std::string dir, uint64_t limit, double wait_s) : dir_(std::move(dir)), limit_(limit), wait_s_(wait_s) {}
  // InvalidArgument for a key that is not a plain file name of the cache's own.
  Status CheckKey(const std::string& key) const;
  // Holds `key` when it is cached at `size` bytes; null when it is not there.
  Result<std::shared_ptr<const CachedFile>> Hold(const std::string& key, uint64_t size) const;
  // Get without waiting: sets *no_room (and fails) when there is no room now.
  Result<std::shared_ptr<const CachedFile>> TryGet(const std::string& key, uint64_t size, const Fetch& fetch,
                                                   bool* no_room) const;
  // With the cache's lock held: evicts unheld files, oldest first, until `size` more bytes
  // fit, then reserves them under a temporary name, which it returns.
  Result<std::string> Reserve(const std::string& key, uint64_t size) const;
  // The error for no room for `key` after `waited_s` seconds: what holds the cache now.
  Status NoRoom(const std::string& key, uint64_t size, double waited_s) const;

  std::string dir_;
  uint64_t limit_;
  double wait_s_;
};

}  // namespace shardify::storage
