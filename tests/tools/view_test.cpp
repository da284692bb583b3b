#include "tools/view.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/tools/fixtures.h"

namespace shardify::tools {
namespace {

using test::TempDir;

TEST_CASE("tools: view runs shardify.view with the dataset and the flags", "[tools]") {
  ViewOptions options;
  options.port = 0;
  options.bind = "::1";
  options.verbose = true;
  const std::vector<std::string> argv = ViewCommand("/usr/bin/python3", "/data/ds", options);
  REQUIRE(argv.size() == 9);
  CHECK(argv[0] == "/usr/bin/python3");
  CHECK(argv[1] == "-c");
  CHECK(argv[2].find("import shardify.view") != std::string::npos);
  CHECK(argv[2].find("sys.exit(2)") != std::string::npos);  // a missing package is a usage error
  CHECK(std::vector<std::string>(argv.begin() + 3, argv.end()) ==
        std::vector<std::string>{"/data/ds", "--port", "0", "--bind", "::1", "--verbose"});
  CHECK(ViewCommand("python3", "d", ViewOptions{}).size() == 8);  // no --verbose
}

TEST_CASE("tools: view finds the package beside a build tree's bin", "[tools]") {
  TempDir dir;
  std::filesystem::create_directories(dir / "bin");
  CHECK(ViewPythonPath(dir / "bin/shardtool", "") == "");
  CHECK(ViewPythonPath(dir / "bin/shardtool", "/mine") == "/mine");
  std::filesystem::create_directories(dir / "python/shardify");
  std::ofstream(dir / "python/shardify/view.py") << "\n";
  CHECK(ViewPythonPath(dir / "bin/shardtool", "") == dir / "python");
  CHECK(ViewPythonPath(dir / "bin/shardtool", "/mine") == dir / "python" + ":/mine");
}

}  // namespace
}  // namespace shardify::tools
