// shardtrain's command line parsed in-process: usage errors refused with the flag named,
// the launcher's environment under the flags, help for the program and each subcommand.
#include "trainer/cli.h"

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace shardify::trainer {
namespace {

Result<Command> Parse(const std::string& line, const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> args;
  std::istringstream in(line);
  for (std::string word; in >> word;) args.push_back(word);
  return ParseCommandLine(args, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

void Refused(const std::string& line, const std::string& says) {
  INFO(line);
  const auto r = Parse(line);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains(says));
}

TEST_CASE("trainer: shardtrain's usage errors are refused before anything runs, naming the flag") {
  const std::string run = "train data -q -o out -e 1 ";
  Refused(run + "--bogus", "--bogus");
  Refused(run + "--optimizer rmsprop", "rmsprop");
  Refused(run + "--batch 0", "batch");
  Refused(run + "--schedule sometimes", "sometimes");
  Refused(run + "--device gpu7", "gpu7");
  Refused(run + "--model transformer", "transformer");
  Refused(run + "--lr -1", "learning rate must be > 0");
  Refused(run + "--order random", "--order");
  Refused(run + "--io nfs", "--io");
  for (const char* negative : {"--epochs -1 --max-steps 1", "--max-steps -1", "--seed -1", "--rank -1 --world-size 2",
                               "--resize 8 -8", "--threads -2"}) {
    Refused(run + negative, "must not be negative");
  }
  Refused(run + "--batch 100000000", "at most 65536");
  Refused(run + "--resize 100000 100000", "1..16384, got 100000");
  Refused(run + "--patch 64x64", "--patch '64x64': expected DxHxW");
  Refused(run + "--aug-p rotate=0.5", "add --aug nnunet");
  Refused(run + "--model unet3d --patch 8x8x8 --aug-p spin=1", "--aug-p");
  Refused(run + "--aug-mask-image 0", "--aug-mask-image sets nnU-Net's augmentation, which is off");
  Refused(run + "--model unet --aug-mask-mode cubic", "--aug-mask-mode");
  Refused(run + "--model unet --aug-mask-image 0,x", "--aug-mask-image");
  Refused(run + "--model unet --aug-ignore-label x", "--aug-ignore-label 'x'");
  const std::string predict = "predict last.pt data -o p.csv ";
  Refused(predict + "--batch 0", "batch");
  Refused(predict + "--batch -1", "must not be negative");
  Refused(predict + "--batch 65537", "65536");
  Refused(predict + "--device gpu7", "gpu7");
  Refused(predict + "--io nfs", "--io");
  Refused("", "subcommand");
}

TEST_CASE("trainer: shardtrain's flags become the options, over the launcher's environment") {
  auto train = Parse("train data -q -o out -e 3 --model unet3d --patch 32x48x64 --order windowed --io pread --json");
  REQUIRE(train.ok());
  CHECK(train->kind == Command::Kind::kTrain);
  CHECK(train->quiet);
  CHECK(train->json);
  CHECK(train->train.data_dir == "data");
  CHECK(train->train.out_dir == "out");
  CHECK(train->train.epochs == 3);
  CHECK(train->train.patch == Shape{32, 48, 64});
  CHECK(train->train.order == SampleOrder::kShardWindowed);
  CHECK(train->train.io == IoMode::kPread);
  CHECK(train->train.nnunet.mask_mode == MaskMode::kLinear);
  CHECK_FALSE(train->train.nnunet.ignore_label);
  CHECK_FALSE(train->train.nnunet.mask_image_channels);  // from the dataset
  auto masking = Parse("train data -q --model unet --aug-mask-mode nearest --aug-ignore-label -1 --aug-mask-image 0,2");
  REQUIRE(masking.ok());
  CHECK(masking->train.nnunet.mask_mode == MaskMode::kNearest);
  CHECK(masking->train.nnunet.ignore_label == -1);
  CHECK(masking->train.nnunet.mask_image_channels == std::vector<int64_t>{0, 2});
  CHECK(Parse("train data -q --model unet --aug-mask-image none")->train.nnunet.mask_image_channels->empty());

  const std::map<std::string, std::string> launcher = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29512"}};
  auto ranked = Parse("train data -q", launcher);
  REQUIRE(ranked.ok());
  CHECK(ranked->train.dist.rank == 1);
  CHECK(ranked->train.dist.world_size == 2);
  CHECK(ranked->train.dist.master_port == 29512);
  auto flagged = Parse("train data -q --rank 0 --master-port 29600", launcher);
  REQUIRE(flagged.ok());
  CHECK(flagged->train.dist.rank == 0);
  CHECK(flagged->train.dist.master_port == 29600);
  const auto bad_env = Parse("train data -q", {{"WORLD_SIZE", "two"}});
  CHECK(bad_env.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad_env.status().message(), Catch::Contains("WORLD_SIZE"));

  auto predict = Parse("predict best.pt data -o masks --split val --source-grid");
  REQUIRE(predict.ok());
  CHECK(predict->kind == Command::Kind::kPredict);
  CHECK(predict->predict.checkpoint == "best.pt");
  CHECK(predict->predict.split == "val");
  CHECK(predict->predict.source_grid);

  auto help = Parse("--help");
  REQUIRE(help.ok());
  CHECK(help->kind == Command::Kind::kHelp);
  CHECK_THAT(help->help, Catch::Contains("train") && Catch::Contains("predict") && Catch::Contains("Exit codes"));
  auto train_help = Parse("train --help");
  REQUIRE(train_help.ok());
  CHECK_THAT(train_help->help, Catch::Contains("--epochs") && Catch::Contains("--master-port"));
}

}  // namespace
}  // namespace shardify::trainer
