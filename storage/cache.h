// A bounded local directory of fetched files, shared by the processes of a node.
//
// Every file enters the cache whole: it is fetched to a temporary name, checked, and
// renamed into place, so no reader ever sees a partial one. One process fetches a file at
// a time (the others wait for it and then use its copy). A held file (CachedFile alive,
// in this or any other process) is never evicted; the least recently used of the others
// go first when room is needed. The limit counts complete files and the full size of
// files being fetched, so processes that fetch at once stay within it together.
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

class Cache {
 public:
  // Writes the file to the temporary path it is given (a new file there), or fails.
  using Fetch = std::function<Status(const std::string& path)>;

  // `dir` is created when missing. `limit_bytes` >= 1.
  static Result<std::shared_ptr<Cache>> Open(const std::string& dir, uint64_t limit_bytes);

  // The file `key` (a plain file name) of `size` bytes, held while the returned object
  // lives. When it is not in the cache, room is made and `fetch` writes it; a fetched file
  // of another size, or a fetch that fails, never enters. ResourceExhausted when held files
  // leave too little room under the limit (naming the sizes); the fetch's own error when
  // it fails.
  Result<std::shared_ptr<const CachedFile>> Get(const std::string& key, uint64_t size, const Fetch& fetch) const;

  // The file `key` of `size` bytes, held, when the cache has it; null when it has not
  // (nothing is fetched). Errors as Get's.
  Result<std::shared_ptr<const CachedFile>> Find(const std::string& key, uint64_t size) const;

  // Bytes of the complete files in the cache now.
  Result<uint64_t> BytesUsed() const;
  const std::string& dir() const { return dir_; }
  uint64_t limit() const { return limit_; }

 private:
  Cache(std::string dir, uint64_t limit) : dir_(std::move(dir)), limit_(limit) {}
  // InvalidArgument for a key that is not a plain file name of the cache's own.
  Status CheckKey(const std::string& key) const;
  // Holds `key` when it is cached at `size` bytes; null when it is not there.
  Result<std::shared_ptr<const CachedFile>> Hold(const std::string& key, uint64_t size) const;
  // With the cache's lock held: evicts unheld files, oldest first, until `size` more bytes
  // fit, then reserves them under a temporary name, which it returns.
  Result<std::string> Reserve(const std::string& key, uint64_t size) const;

  std::string dir_;
  uint64_t limit_;
};

}  // namespace shardify::storage
