#include "tools/view.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace shardify::tools {

namespace {

#ifdef SHARDIFY_TOOLS_PYTHON
constexpr char kBuiltFor[] = SHARDIFY_TOOLS_PYTHON;
#else
constexpr char kBuiltFor[] = "";
#endif

// Imports the viewer or says how to get it; exit code 2 as shardtool's for a missing dependency.
constexpr char kBootstrap[] =
    "import sys\n"
    "try:\n"
    "    import shardify.view\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('shardtool view: needs the shardify Python package and numpy (%s). '\n"
    "                     'Build it (cmake --build build --target shardify_python) and run build/bin/shardtool, '\n"
    "                     'or pip install . from the source tree, '\n"
    "                     'or set SHARDIFY_PYTHON to an interpreter that has it\\n' % e)\n"
    "    sys.exit(2)\n"
    "sys.exit(shardify.view.main(sys.argv[1:]))\n";

std::string Interpreter() {
  if (const char* env = std::getenv("SHARDIFY_PYTHON"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (*kBuiltFor != '\0' && std::filesystem::exists(kBuiltFor, ec)) return kBuiltFor;
  return "python3";
}

}  // namespace

std::vector<std::string> ViewCommand(const std::string& python, const std::string& dir, const ViewOptions& options) {
  std::vector<std::string> argv = {python,   "-c",        kBootstrap, dir, "--port", std::to_string(options.port),
                                   "--bind", options.bind};
  if (options.verbose) argv.push_back("--verbose");
  return argv;
}

std::string ViewPythonPath(const std::string& exe, const std::string& current) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path package = fs::path(exe).parent_path().parent_path() / "python";
  if (!fs::exists(package / "shardify" / "view.py", ec)) return current;
  return current.empty() ? package.string() : package.string() + ":" + current;
}

Status RunView(const std::string& dir, const ViewOptions& options) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const char* current = std::getenv("PYTHONPATH");
  const std::string path = ViewPythonPath(ec ? "" : exe.string(), current == nullptr ? "" : current);
  if (!path.empty() && setenv("PYTHONPATH", path.c_str(), 1) != 0) {
    return Internal(std::string("view: cannot set PYTHONPATH: ") + std::strerror(errno));
  }
  const std::vector<std::string> command = ViewCommand(Interpreter(), dir, options);
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  return NotFound("view: cannot run " + command[0] + " (" + std::strerror(errno) +
                  "); the viewer is the shardify Python package's: set SHARDIFY_PYTHON to a Python 3 with it");
}

}  // namespace shardify::tools
