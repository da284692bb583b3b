// shardtool view: the local web viewer, which is the Python package's shardify.view; this
// runs it in the interpreter the package was built for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace shardify::tools {

struct ViewOptions {
  uint32_t port = 8765;            // 0 = any free port (the URL is printed)
  std::string bind = "127.0.0.1";  // loopback: this machine alone
  bool verbose = false;            // log every request
};

// The command line that runs the viewer: `python` -c (a line that imports shardify.view,
// explaining how to get the package when it cannot, and calls its main) followed by the
// arguments of `dir` and `options`.
std::vector<std::string> ViewCommand(const std::string& python, const std::string& dir, const ViewOptions& options);

// The PYTHONPATH that finds the package next to the program `exe` (a build tree's bin/ has
// python/ beside it) before `current` (the caller's PYTHONPATH, may be empty); `current`
// alone when there is no package there.
std::string ViewPythonPath(const std::string& exe, const std::string& current);

// Replaces this process with the viewer: the interpreter is $SHARDIFY_PYTHON, else the one the
// package was built for, else python3 on PATH. Returns only on failure to start it (NotFound).
Status RunView(const std::string& dir, const ViewOptions& options);

}  // namespace shardify::tools
