// Running programs from a test: through the shell for an exit code (and the output), or
// started in the background with the output in a log.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace shardify::testing {

// The exit code in a wait status; -1 when the process was killed by a signal (or `status`
// is -1: it never ran).
inline int ExitCodeOf(int status) { return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

// Runs `command` with /bin/sh and waits for it; returns its exit code (see ExitCodeOf).
// Without `output`, what it prints goes where the test's own output goes; with it, its
// stdout and stderr (those of every command in `command`) are appended to *output, and the
// redirections in `command` still apply ("prog >/dev/null" keeps only stderr).
inline int Shell(const std::string& command, std::string* output = nullptr) {
  if (output == nullptr) return ExitCodeOf(std::system(command.c_str()));
  FILE* p = ::popen(("exec 2>&1; " + command).c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  return ExitCodeOf(::pclose(p));
}

// Starts the program args[0] with `args` and returns at once; its stdout and stderr go to
// the file `log` (replaced). The caller waits for the child (WaitExitCode) or kills it.
inline pid_t Spawn(const std::vector<std::string>& args, const std::string& log = "/dev/null") {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for the child `pid` to end; its exit code (see ExitCodeOf).
inline int WaitExitCode(pid_t pid) {
  int status = -1;
  return ::waitpid(pid, &status, 0) == pid ? ExitCodeOf(status) : -1;
}

}  // namespace shardify::testing
