#include "base/cli.h"

#include <cerrno>
#include <cstdlib>
#include <string>

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

}  // namespace shardify::cli
