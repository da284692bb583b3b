// shardify: converts an image dataset (PNG, JPEG, NIfTI, idx) into a shard dataset, or
// (`shardify merge DST`) merges the parts of one converted in parts.
// Flags live in cli.cpp (shared with the Python binding); this is the thin boundary.
#include <unistd.h>

#include <cstdio>

#include "base/cli.h"
#include "convert/convert.h"
#include "convert/pipeline/parts.h"
#include "convert/pipeline/progress.h"
#include "convert/programs/cli.h"

namespace {

// `shardify merge DST`: makes DST the dataset from its converted parts.
int MergeMain(const std::vector<std::string>& args) {
  using namespace shardify::convert;
  auto parsed = ParseMergeCommandLine(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "shardify merge: %s\nRun with --help for more information.\n",
                 parsed.status().message().c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(parsed->help_text.c_str(), stdout);
    return 0;
  }
  auto merged = Merge(parsed->dest, parsed->fsync);
  if (!merged.ok()) {
    std::fprintf(stderr, "shardify merge: %s\n", merged.status().ToString().c_str());
    return 1;
  }
  std::fputs(FormatMergeSummary(parsed->dest, *merged).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardify::convert;
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "merge") return MergeMain({args.begin() + 1, args.end()});
  auto parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "shardify: %s\nRun with --help for more information.\n", parsed.status().message().c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(CommandLineHelp().c_str(), stdout);
    return 0;
  }
  ConvertOptions o = parsed->options;
  o.cancel = shardify::cli::InstallStopSignals();

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
