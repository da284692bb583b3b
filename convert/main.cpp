// shardify: converts an image dataset (PNG, JPEG, NIfTI, idx) into a shard dataset.
// Flags live in cli.cpp (shared with the Python binding); this is the thin boundary.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "convert/cli.h"
#include "convert/convert.h"
#include "convert/progress.h"

namespace {

std::atomic<bool> g_cancel{false};

extern "C" void OnSignal(int) {
  if (g_cancel.exchange(true)) _exit(130);  // a second Ctrl-C ends at once
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardify::convert;
  auto parsed = ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::fprintf(stderr, "shardify: %s\nRun with --help for more information.\n", parsed.status().message().c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(CommandLineHelp().c_str(), stdout);
    return 0;
  }
  ConvertOptions o = parsed->options;
  o.cancel = &g_cancel;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  ConsoleProgress progress(stderr, isatty(STDERR_FILENO) != 0);
  auto result = Convert(o, parsed->quiet ? nullptr : &progress);
  progress.Done();
  if (!result.ok()) {
    std::fprintf(stderr, "shardify: %s\n", result.status().ToString().c_str());
    return result.status().code() == shardify::StatusCode::kCancelled ? 130 : 1;
  }
  std::fputs(FormatSummary(*result).c_str(), stdout);
  return 0;
}
