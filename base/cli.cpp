#include "base/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
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

std::atomic<bool> g_stop{false};
std::atomic<int64_t> g_stop_ns{0};  // CLOCK_MONOTONIC of the first stop signal; 0: none yet
constexpr int64_t kRepeatNs = 1000000000;

extern "C" void OnStopSignal(int) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  const int64_t ns = std::max<int64_t>(int64_t(now.tv_sec) * 1000000000 + now.tv_nsec, 1);
  int64_t first = 0;
  if (g_stop_ns.compare_exchange_strong(first, ns)) {
    g_stop = true;
    return;
  }
  if (ns - first >= kRepeatNs) _exit(130);
}

}  // namespace

const std::atomic<bool>* InstallStopSignals() {
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  return &g_stop;
}

void StatusLine::Show(const std::string& text) {
  std::fprintf(out_, "%s%s%s", tty_ ? "\r" : "", text.c_str(), tty_ ? "" : "\n");
  std::fflush(out_);
  open_ = tty_;
}

void StatusLine::End() {
  if (open_) std::fputc('\n', out_);
  open_ = false;
}

std::string ProgressBar(double fraction, int width) {
  const double f = std::min(std::max(fraction, 0.0), 1.0);
  std::string bar(static_cast<size_t>(f * width), '#');
  bar.resize(static_cast<size_t>(width), '.');
  return "[" + bar + "]";
}

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
