#include "tests/storage/servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <vector>

namespace shardify::testing {
namespace {

// A listening socket on 127.0.0.1 at a port the kernel picks; returns the fd, sets *port.
int Listen(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) return -1;
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

Lighttpd::Lighttpd(const std::string& root, const std::string& work, const std::string& more) {
  int port = 0;
  const int probe = Listen(&port);  // a free port, released for lighttpd to take
  if (probe < 0) {
    why_ = "no free port on 127.0.0.1";
    return;
  }
  ::close(probe);
  const std::string conf = work + "/lighttpd.conf";
  std::ofstream(conf) << "server.document-root = \"" << root << "\"\n"
                      << "server.bind = \"127.0.0.1\"\n"
                      << "server.port = " << port << "\n"
                      << "server.errorlog = \"" << work << "/lighttpd-error.log\"\n"
                      << "mimetype.assign = (\"\" => \"application/octet-stream\")\n"
                      << more << "\n";
  const char* binary = "/usr/sbin/lighttpd";
  if (::access(binary, X_OK) != 0) {
    why_ = std::string(binary) + " is missing (Debian package lighttpd; scripts/install-deps.sh installs it)";
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl(binary, binary, "-D", "-f", conf.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 200; ++i) {  // up to 10 s
    if (Accepts(port)) {
      port_ = port;
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      why_ = "lighttpd exited at start (see " + work + "/lighttpd-error.log)";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  why_ = "lighttpd did not accept connections within 10 s";
}

Lighttpd::~Lighttpd() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
}

MisbehavingServer::MisbehavingServer(Misbehaviour how) : how_(how) {
  listener_ = Listen(&port_);
  thread_ = std::thread([this] { Serve(); });
}

MisbehavingServer::~MisbehavingServer() {
  stop_ = true;
  thread_.join();
  if (listener_ >= 0) ::close(listener_);
}

std::vector<std::string> MisbehavingServer::heads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heads_;
}

void MisbehavingServer::Accept(int c) {
  std::string got;
  char buf[65536];
  size_t body = std::string::npos;  // where the body starts, once the headers are in
  uint64_t length = 0;
  while (true) {
    pollfd r{c, POLLIN, 0};
    if (::poll(&r, 1, 2000) <= 0) break;
    const ssize_t n = ::recv(c, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (body == std::string::npos && (body = got.find("\r\n\r\n")) != std::string::npos) {
      body += 4;
      std::string headers = got.substr(0, body);
      std::transform(headers.begin(), headers.end(), headers.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      const size_t at = headers.find("content-length:");
      if (at != std::string::npos) length = std::stoull(headers.substr(at + 15));
    }
    if (body != std::string::npos && got.size() >= body + length) break;
  }
  ++requests_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    heads_.push_back(got.substr(0, body));
  }
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
  ::close(c);
}

void MisbehavingServer::Trickle(int c) {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n";
  if (::send(c, head.data(), head.size(), MSG_NOSIGNAL) < 0) return;
  for (int sent = 0; sent < 1000 && !stop_; ++sent) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if (::send(c, "x", 1, MSG_NOSIGNAL) != 1) return;  // the client went away
  }
}

std::string MisbehavingServer::Listing(const std::string& request, int page) {
  // The prefix= of the request line, percent-decoded.
  const size_t line = request.find("\r\n"), at = request.find("prefix=");
  std::string prefix;
  for (size_t i = at + 7; at != std::string::npos && i < line && request[i] != '&' && request[i] != ' '; ++i) {
    if (request[i] == '%' && i + 2 < line) {
      prefix += static_cast<char>(std::stoi(request.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      prefix += request[i];
    }
  }
  std::string xml = "<ListBucketResult><IsTruncated>true</IsTruncated>";
  for (int k = 0; how_ == Misbehaviour::kEndlessListing && k < 1000; ++k) {
    xml += "<Contents><Key>" + prefix + "k" + std::to_string(page * 1000 + k) + "</Key><Size>1</Size></Contents>";
  }
  xml += "<NextContinuationToken>t" + std::to_string(page) + "</NextContinuationToken></ListBucketResult>";
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(xml.size()) + "\r\nConnection: close\r\n\r\n" + xml;
}

void MisbehavingServer::Serve() {
  std::vector<int> open;
  while (!stop_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    if (how_ == Misbehaviour::kAcceptPuts) {
      Accept(c);
      continue;
    }
    char request[4096];
    pollfd r{c, POLLIN, 0};
    ssize_t got = 0;
    if (::poll(&r, 1, 2000) > 0) got = ::recv(c, request, sizeof request, 0);
    const int page = requests_++;
    if (how_ == Misbehaviour::kStall) {
      open.push_back(c);  // answered never; closed when the server stops
      continue;
    }
    if (how_ == Misbehaviour::kTrickle) {
      Trickle(c);
      ::close(c);
      continue;
    }
    std::string answer = how_ == Misbehaviour::kTruncate
                             ? "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n0123456789"
                             : "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    if (how_ == Misbehaviour::kEndlessListing || how_ == Misbehaviour::kEmptyListing) {
      answer = Listing(std::string(request, static_cast<size_t>(std::max<ssize_t>(got, 0))), page);
    }
    ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::close(c);
  }
  for (int c : open) ::close(c);
}

}  // namespace shardify::testing
