// Ranks of shardtrain started by a test: a child process with the environment a launcher
// gives a rank, a port for the store that no concurrent test takes, and their logs.
// SHARDTRAIN_BIN names the program (tests/trainer/CMakeLists.txt defines it).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace shardify::testing {

// The text of file `path` ("" when it cannot be read).
inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A port of 29500-29549 for a rank-0-hosted store, held for the test's life: a lock file
// per port (taken by every test process that uses this range, whatever its build
// directory) and a bind check against other programs.
class PortLease {
 public:
  PortLease() {
    for (int p = 29500; p < 29550 && port_ == 0; ++p) {
      const std::string lock = "/tmp/shardify-test-port-" + std::to_string(p) + ".lock";
      const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0) continue;
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && Free(p)) {
        fd_ = fd;
        port_ = p;
      } else {
        ::close(fd);
      }
    }
  }
  ~PortLease() {
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }

 private:
  static bool Free(int port) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    return ok;
  }
  int fd_ = -1, port_ = 0;
};

// A child process running `argv` with environment `env`, its output to `log`. With
// `own_group`, it leads a process group of its own (as a shell's foreground job), so that a
// signal can reach it and everything it starts, as the terminal's Ctrl-C does. Everything
// the child needs is prepared before fork (the child only calls setpgid, open, dup2, execve).
class Child {
 public:
  Child(std::vector<std::string> argv, std::vector<std::string> env, const std::string& log, bool own_group = false)
      : group_(own_group) {
    std::vector<char*> cargv, cenv;
    for (std::string& a : argv) cargv.push_back(a.data());
    for (std::string& e : env) cenv.push_back(e.data());
    cargv.push_back(nullptr);
    cenv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ != 0) return;
    if (own_group) ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(group_ ? -pid_ : pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  void Signal(int sig) const { ::kill(pid_, sig); }
  // `sig` to the child's whole process group (own_group only).
  void SignalGroup(int sig) const { ::kill(-pid_, sig); }
  // The exit code (128 + signal when killed), or -1 when it still runs after `seconds`
  // (a hang: the test then fails instead of waiting on).
  int Wait(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool group_ = false;
  bool reaped_ = false;
};

inline std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> w;
  std::istringstream in(text);
  for (std::string word; in >> word;) w.push_back(word);
  return w;
}

// This process's environment without the variables a launcher sets.
inline std::vector<std::string> Environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    if (var.rfind("TORCHELASTIC_", 0) != 0 && var.rfind("RANK=", 0) != 0 && var.rfind("WORLD_SIZE=", 0) != 0) {
      env.push_back(var);
    }
  }
  return env;
}

inline std::vector<std::string> RankArgv(const std::string& args) {
  std::vector<std::string> argv = Words(args);
  argv.insert(argv.begin(), SHARDTRAIN_BIN);
  return argv;
}

// This process's environment with the launcher's variables for rank `rank` of `world`, the
// store on 127.0.0.1:`port`, and `extra` ("NAME=value", replacing this process's NAME).
inline std::vector<std::string> RankEnvironment(int rank, int world, int port,
                                                const std::vector<std::string>& extra = {}) {
  std::vector<std::string> env = Environment();
  for (const std::string& e : extra) {
    const std::string name = e.substr(0, e.find('=') + 1);
    env.erase(std::remove_if(env.begin(), env.end(), [&](const std::string& v) { return v.rfind(name, 0) == 0; }),
              env.end());
  }
  for (const std::string& v :
       {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world),
        "LOCAL_WORLD_SIZE=" + std::to_string(world), std::string("MASTER_ADDR=127.0.0.1"),
        "MASTER_PORT=" + std::to_string(port), std::string("OMP_NUM_THREADS=1")}) {
    env.push_back(v);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// One rank of shardtrain `args` started here with the environment a launcher gives it, and
// `extra`; output to `log`.
class Rank : public Child {
 public:
  Rank(int rank, int world, int port, const std::string& args, const std::string& log,
       const std::vector<std::string>& extra = {})
      : Child(RankArgv(args), RankEnvironment(rank, world, port, extra), log) {}
};

// Waits until `path` holds `text` (false after `seconds`).
inline bool WaitForText(const std::string& path, const std::string& text, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (Slurp(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace shardify::testing
