#include "base/cli.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/strings.h"

namespace shardify::cli {
namespace {

// "" when `text` is a whole number >= 0 that fits in 64 bits (or not a number at all:
// CLI11's conversion then says so), else why not.
std::string NonNegative(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first != std::string::npos && text[first] == '-') return "must not be negative, got " + text;
  errno = 0;
  char* end = nullptr;
  std::strtoull(text.c_str(), &end, 0);
  if (errno == ERANGE) return "is too large, got " + text;
  return "";
}

bool TakesIntegers(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  const std::string base = type.substr(0, type.find(':'));  // then the descriptions of its checks
  return base == "INT" || base == "UINT";
}

}  // namespace

void CheckIntegerOptions(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (TakesIntegers(*option)) option->check(CLI::Validator(NonNegative, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) CheckIntegerOptions(*sub);
}

void AddCacheOptions(CLI::App& app) {
  app.add_option_function<std::string>(
         "--cache-dir", [](const std::string& dir) { ::setenv("SHARDIFY_CACHE_DIR", dir.c_str(), 1); },
         "For an http(s):// dataset: the folder shards are fetched into (default $SHARDIFY_CACHE_DIR,\n"
         "else ~/.cache/shardify); the processes of a node share it")
      ->type_name("DIR");
  app.add_option_function<std::string>(
         "--cache-limit", [](const std::string& size) { ::setenv("SHARDIFY_CACHE_LIMIT", size.c_str(), 1); },
         "For an http(s):// dataset: the most bytes its cache holds, e.g. 20G (default\n"
         "$SHARDIFY_CACHE_LIMIT, else the dataset's size, at most half the free space)")
      ->type_name("SIZE")
      ->check([](const std::string& size) {
        const Result<uint64_t> bytes = ParseByteSize(size);
        return bytes.ok() ? std::string() : bytes.status().message();
      });
}

}  // namespace shardify::cli
