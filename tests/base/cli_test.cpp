#include "base/cli.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardify::cli {
namespace {

// Options of every integer type the programs use, in a subcommand, checked once.
struct Options {
  uint64_t count = 0;
  size_t size = 0;
  int number = 0;
  std::optional<int> maybe;
  std::vector<int64_t> pair;
  double real = 0;
  bool flag = false;
};

// "" when `args` parse, else the error message.
std::string Parse(std::vector<std::string> args, Options& o) {
  CLI::App app{"test"};
  CLI::App* sub = app.add_subcommand("run");
  sub->add_option("--count", o.count);
  sub->add_option("--size", o.size);
  sub->add_option("--number", o.number)->check(CLI::Range(1, 9));
  sub->add_option("--maybe", o.maybe);
  sub->add_option("--pair", o.pair)->expected(2);
  sub->add_option("--real", o.real);
  sub->add_flag("--flag", o.flag);
  CheckIntegerOptions(app);
  args.insert(args.begin(), {"test", "run"});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("cli: integer options refuse negative values and values past 64 bits, in subcommands too") {
  Options o;
  CHECK(Parse({"--count", "-1"}, o) == "--count: must not be negative, got -1");
  CHECK_THAT(Parse({"--size", "-5"}, o), Catch::Contains("must not be negative"));
  CHECK_THAT(Parse({"--maybe", "-1"}, o), Catch::Contains("--maybe") && Catch::Contains("negative"));
  CHECK_THAT(Parse({"--pair", "4", "-2"}, o), Catch::Contains("--pair") && Catch::Contains("negative"));
  CHECK_THAT(Parse({"--number", "-3"}, o), Catch::Contains("--number"));
  CHECK_THAT(Parse({"--count", "18446744073709551616"}, o), Catch::Contains("too large"));
  CHECK(o.count == 0);
  CHECK(o.maybe == std::nullopt);
}

TEST_CASE("cli: the integer check passes every value that fits, and leaves other options alone") {
  Options o;
  REQUIRE(Parse({"--count", "18446744073709551615", "--size", "0", "--number", "9", "--maybe", "3", "--pair", "0", "7",
                 "--real", "-2.5", "--flag"},
                o) == "");
  CHECK(o.count == UINT64_MAX);
  CHECK(o.number == 9);
  CHECK(o.maybe == 3);
  CHECK(o.pair == std::vector<int64_t>{0, 7});
  CHECK(o.real == -2.5);
  CHECK(o.flag);
}

}  // namespace
}  // namespace shardify::cli
