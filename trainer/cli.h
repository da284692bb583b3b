// shardtrain's command line: `train` and `predict` parsed into their options with every
// usage rule checked, so that main() only runs what it is given and the usage rules are
// tested in-process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/train.h"

namespace shardify::trainer {

struct Command {
  enum class Kind { kHelp, kTrain, kPredict };
  Kind kind = Kind::kHelp;
  std::string help;  // kHelp: the text to print (--help of the program or a subcommand)
  TrainOptions train;
  PredictOptions predict;
  bool json = false;   // the summary (train) or the metrics (predict) as JSON
  bool quiet = false;  // no progress bar
};

// Parses `args` (argv without the program name). `getenv` reads the launcher's
// environment (RANK, WORLD_SIZE, ...; flags override it). Usage errors (an unknown flag, a
// value out of range, options that do not go together, an environment that does not
// parse) are InvalidArgument with the message to show.
Result<Command> ParseCommandLine(const std::vector<std::string>& args,
                                 const std::function<const char*(const char*)>& getenv);

}  // namespace shardify::trainer
