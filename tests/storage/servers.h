// Servers the storage tests read from, on 127.0.0.1 only: Debian's lighttpd serving a
// folder, and a server that misbehaves on purpose (stalls, or cuts bodies short).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shardify::testing {

// lighttpd (-D, in the foreground) serving `root` on a free port of 127.0.0.1, stopped
// when the object dies; `more` is added to its configuration (e.g. a url.redirect, with
// server.modules += ("mod_redirect")). Its files go in `work`. started() is false, with
// why() set, when it could not start.
class Lighttpd {
 public:
  Lighttpd(const std::string& root, const std::string& work, const std::string& more = "");
  ~Lighttpd();
  bool started() const { return port_ != 0; }
  const std::string& why() const { return why_; }
  // "http://127.0.0.1:PORT"
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string why_;
};

enum class Misbehaviour {
  kStall,       // accepts, reads the request, never answers
  kTruncate,    // answers 200 with Content-Length 1000, sends 10 bytes, closes
  kError503,    // answers 503 every time
  kAcceptPuts,  // reads each whole request, answers 200, and keeps its head
  kTrickle,     // answers 200 with Content-Length 1000, then sends a byte every 0.25 s
  // Answers each request with a ListObjectsV2 page that goes on: 1,000 new keys under
  // the prefix asked for (kEndlessListing), or none (kEmptyListing).
  kEndlessListing,
  kEmptyListing,
};

// A one-thread HTTP server on a free port of 127.0.0.1 that misbehaves; counts requests.
class MisbehavingServer {
 public:
  explicit MisbehavingServer(Misbehaviour how);
  ~MisbehavingServer();
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  // kAcceptPuts: the heads of the requests received (request line and headers), in order.
  std::vector<std::string> heads() const;

 private:
  void Serve();
  void Accept(int connection);                                // kAcceptPuts
  void Trickle(int connection);                               // kTrickle
  std::string Listing(const std::string& request, int page);  // kEndlessListing, kEmptyListing
  Misbehaviour how_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  mutable std::mutex mu_;
  std::vector<std::string> heads_;
  std::thread thread_;
};

}  // namespace shardify::testing
