// The shardify command line, in one place for the CLI and the Python binding.
//
//   ASSIGN_OR_RETURN(CommandLine c, ParseCommandLine({"SRC", "-o", "DST", "--level", "9"}));
//   if (c.help) { print CommandLineHelp(); } else { Convert(c.options, ...); }
//
// Every flag, its help text and its checks live in cli.cpp, so a new option is one entry
// there and reaches both front ends. Nothing here throws or prints.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "convert/convert.h"

namespace shardify::convert {

struct CommandLine {
  ConvertOptions options;
  bool quiet = false;  // -q: no progress output
  bool help = false;   // --help was given; nothing else is set
};

// Parses the arguments after the program name. A usage error (unknown flag, bad value,
// missing SRC or -o) is InvalidArgument with a message naming the flag.
Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// The text `shardify --help` prints.
std::string CommandLineHelp();

// `shardify merge DST [--no-fsync]`: the arguments after "merge".
struct MergeCommandLine {
  std::string dest;
  bool fsync = true;
  bool help = false;  // --help was given; help_text is what to print
  std::string help_text;
};
Result<MergeCommandLine> ParseMergeCommandLine(const std::vector<std::string>& args);

// One flag of the command line, for front ends that map their own arguments onto it.
struct FlagInfo {
  std::string name;         // long name without dashes, e.g. "patch-size"
  bool takes_value = true;  // false: a switch such as --overwrite
  std::string help;
};
std::vector<FlagInfo> CommandLineFlags();

}  // namespace shardify::convert
