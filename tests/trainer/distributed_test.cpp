// Distributed shardtrain: several local processes over loopback (c10d, Gloo), launched by
// scripts/launch.py or started here with the launcher's environment.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../common/process.h"
#include "../common/temp_dir.h"
#include "catch_torch.h"
#include "fixtures.h"
#include "ranks.h"
#include "trainer/distributed_internal.h"
#include "trainer/models.h"
#include "trainer/optim.h"
#include "trainer/train.h"

namespace st = shardify::trainer;
using namespace shardify;
using Json = nlohmann::json;

namespace {

using testing::Child;
using testing::Environment;
using testing::PortLease;
using testing::Rank;
using testing::RankArgv;
using testing::Shell;
using testing::Slurp;
using testing::WaitForText;

// scripts/launch.py hosts its store on the first free port of these: a port it binds itself,
// so concurrent launches cannot share one.
const char* const kLaunchPorts = "29550-29599";

// `ranks` ranks of shardtrain through scripts/launch.py.
int Launch(int ranks, const std::string& args, const std::string& log) {
  return Shell(std::string(PYTHON_BIN) + " " + LAUNCH_PY + " --nproc " + std::to_string(ranks) + " --ports " +
               kLaunchPorts + " -- " + SHARDTRAIN_BIN + " " + args + " >" + log + " 2>&1");
}

// The JSON summary line of a log (rank 0 prints it).
Json Summary(const std::string& log) {
  std::istringstream in(Slurp(log));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '{') return Json::parse(line);
  }
  return Json();
}

std::vector<Json> MetricLines(const std::string& path) {
  std::vector<Json> out;
  std::istringstream in(Slurp(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(Json::parse(line));
  }
  return out;
}

std::map<std::string, torch::Tensor> Weights(const std::string& checkpoint) {
  Result<st::CheckpointMeta> meta = st::ReadCheckpointMeta(checkpoint);
  REQUIRE(meta.ok());
  Result<std::shared_ptr<st::Model>> model = st::MakeModel(meta->model);
  REQUIRE(model.ok());
  REQUIRE(st::LoadCheckpoint(checkpoint, **model, nullptr).ok());
  std::map<std::string, torch::Tensor> w;
  for (const auto& p : (*model)->named_parameters()) w[p.key()] = p.value().detach().clone();
  return w;
}

double MaxDifference(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (const auto& [name, t] : a) worst = std::max(worst, (t - b.at(name)).abs().max().item<double>());
  return worst;
}

std::string TrainArgs(const std::string& data, const std::string& out, int batch, int epochs) {
  return "train " + data + " --model mlp --optimizer adam --lr 0.003 --batch " + std::to_string(batch) + " --epochs " +
         std::to_string(epochs) + " --seed 3 --threads 1 --test-split test --out " + out;
}

}  // namespace

TEST_CASE("distributed: ranks of batch 32 or 16 x 2 end with the weights and metrics of 1 rank of batch 64",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "data", false, 192).ok());  // 3 global batches of 64
  REQUIRE(Shell(std::string(SHARDTRAIN_BIN) + " " + TrainArgs(dir / "data", dir / "one", 64, 2) + " --json >" +
                (dir / "one.log") + " 2>&1") == 0);
  REQUIRE(Launch(2, TrainArgs(dir / "data", dir / "two", 32, 2) + " --json", dir / "two.log") == 0);
  INFO(Slurp(dir / "two.log"));

  CHECK(MaxDifference(Weights(dir / "one/last.pt"), Weights(dir / "two/last.pt")) < 1e-5);
  const std::vector<Json> one = MetricLines(dir / "one/metrics.jsonl"), two = MetricLines(dir / "two/metrics.jsonl");
  REQUIRE(one.size() == 2);
  REQUIRE(two.size() == 2);  // written by rank 0 alone
  for (const char* k : {"val_loss", "val_accuracy", "val_auc"}) {
    CHECK(two[1][k].get<double>() == Approx(one[1][k].get<double>()).margin(1e-5));
  }
  CHECK(two[1]["train_loss"].get<double>() == Approx(one[1]["train_loss"].get<double>()).margin(1e-5));
  const Json s1 = Summary(dir / "one.log"), s2 = Summary(dir / "two.log");
  CHECK(s2["rank"] == 0);
  CHECK(s2["world_size"] == 2);
  CHECK(s1["world_size"] == 1);
  CHECK(s2["metrics"]["test_accuracy"].get<double>() == Approx(s1["metrics"]["test_accuracy"].get<double>()));
  CHECK(Slurp(dir / "two.log").find("epoch 2: train_loss") != std::string::npos);
  CHECK(Slurp(dir / "two.log").find("epoch 2: train_loss", Slurp(dir / "two.log").find("epoch 2: train_loss") + 1) ==
        std::string::npos);  // rank 0 alone reports progress

  // 2 ranks accumulating 2 batches of 16 per step see the same 64 samples per step.
  REQUIRE(Launch(2, TrainArgs(dir / "data", dir / "acc", 16, 2) + " --accumulate 2", dir / "acc.log") == 0);
  CHECK(MaxDifference(Weights(dir / "one/last.pt"), Weights(dir / "acc/last.pt")) < 1e-5);

  // 3 ranks resuming the finished 1-rank run take no step, only the test split (32 samples:
  // 11, 11 and 10 per rank, 2 read twice), on the same weights: the same figures.
  REQUIRE(Launch(3, TrainArgs(dir / "data", dir / "three", 64, 2) + " --json --resume " + (dir / "one/last.pt"),
                 dir / "three.log") == 0);
  const std::string log = Slurp(dir / "three.log");
  INFO(log);
  CHECK(log.find("last epoch boundary") != std::string::npos);
  const Json s3 = Summary(dir / "three.log");
  CHECK(s3["world_size"] == 3);
  for (const char* k : {"test_loss", "test_accuracy", "test_auc"}) {
    CHECK(s3["metrics"][k].get<double>() == Approx(s1["metrics"][k].get<double>()).margin(1e-6));
  }
}

// The JSON summaries of one process training `args` (ending in --out) for its epochs, then
// of `ranks` ranks resuming its last.pt: they take no step, and evaluate the same weights.
std::pair<Json, Json> OneThenResumed(const std::string& dir, const std::string& args, int ranks) {
  REQUIRE(Shell(std::string(SHARDTRAIN_BIN) + " " + args + dir + "/one --json >" + dir + "/one.log 2>&1") == 0);
  REQUIRE(Launch(ranks, args + dir + "/many --json --resume " + dir + "/one/last.pt", dir + "/many.log") == 0);
  return {Summary(dir + "/one.log"), Summary(dir + "/many.log")};
}

TEST_CASE("distributed: Dice counts summed over 3 ranks equal the single process's Dice",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteSegFixture(dir / "data").ok());
  const std::string args = "train " + dir / "data" +
                           " --model unet --base-channels 4 --aug none --batch 16 "
                           "--epochs 1 --threads 1 --test-split val --out ";
  const auto [s1, s3] = OneThenResumed(dir.path(), args, 3);
  INFO(Slurp(dir / "many.log"));
  for (const char* k : {"test_dice", "test_dice_0", "test_dice_1"}) {
    CHECK(s3["metrics"][k].get<double>() == Approx(s1["metrics"][k].get<double>()).margin(1e-9));
  }
}

TEST_CASE("distributed: a multi-label unet's Dice per organ over 2 ranks equals 1 rank's",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteOrganFixture(dir / "data", 16, 9).ok());  // val: 5 samples on rank 0, 4 on rank 1
  const std::string args = "train " + dir / "data" +
                           " --model unet --base-channels 4 --aug none --batch 8 "
                           "--resize 32 32 --epochs 1 --threads 1 --test-split val --out ";
  const auto [s1, s2] = OneThenResumed(dir.path(), args, 2);
  INFO(Slurp(dir / "many.log"));
  CHECK(s2["world_size"] == 2);
  for (const char* k : {"test_dice", "test_dice_large_bowel", "test_dice_small_bowel", "test_dice_stomach"}) {
    INFO(k);
    REQUIRE(s1["metrics"][k].is_number());
    CHECK(s2["metrics"][k].get<double>() == Approx(s1["metrics"][k].get<double>()).margin(1e-9));
  }
}

TEST_CASE("distributed: --max-steps within an epoch validates on every rank, and rank 0 writes the outputs",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteOrganFixture(dir / "data", 32, 8).ok());  // 4 steps of 4 samples per rank and epoch
  const std::string args = "train " + dir / "data" +
                           " --model unet --base-channels 4 --aug none --batch 4 "
                           "--resize 32 32 --epochs 2 --max-steps 3 --threads 1 --progress-seconds 0.01 --json --out " +
                           (dir / "out");
  REQUIRE(Launch(2, args, dir / "log") == 0);
  const std::string log = Slurp(dir / "log");
  INFO(log);
  const Json s = Summary(dir / "log");
  CHECK(s["world_size"] == 2);
  CHECK(s["steps"] == 3);
  CHECK(s["epochs"] == 0);
  CHECK(s["validation_seconds"].get<double>() > 0);
  CHECK(s["wall_seconds"].get<double>() >= s["seconds"].get<double>() + s["validation_seconds"].get<double>());
  for (const char* organ : {"val_dice_large_bowel", "val_dice_small_bowel", "val_dice_stomach"}) {
    CHECK(s["metrics"][organ].is_number());
  }
  const std::vector<Json> lines = MetricLines(dir / "out/metrics.jsonl");
  REQUIRE(lines.size() == 1);  // rank 0's alone
  CHECK(lines[0]["partial"] == true);
  CHECK(lines[0]["steps"] == 3);
  CHECK(lines[0]["val_dice_stomach"] == s["metrics"]["val_dice_stomach"]);
  CHECK(std::filesystem::exists(dir / "out/best.pt"));
  CHECK(std::filesystem::exists(dir / "out/curve.png"));
  Result<st::CheckpointMeta> meta = st::ReadCheckpointMeta(dir / "out/last.pt");
  REQUIRE(meta.ok());
  CHECK(meta->world_size == 2);
  CHECK(meta->epochs_done == 0);
  CHECK(meta->multi_label);
  const size_t first = log.find("(stopped after 3 steps)");
  CHECK(first != std::string::npos);
  CHECK(log.find("(stopped after 3 steps)", first + 1) == std::string::npos);  // rank 0 alone reports
}

// The stop reaches the ranks at different steps; they agree on one, validate, and rank 0
// writes the outputs and its summary: an orderly end on every rank, exit code 130.
TEST_CASE("distributed: a stop asked on one rank, or at the launcher's terminal, stops every rank after one step",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "data", false, 64).ok());
  const std::string args =
      TrainArgs(dir / "data", dir / "out", 16, 100000) + " --json --progress-seconds 0.05 --dist-timeout 60";
  const std::string log = dir / "rank0.log";
  SECTION("SIGTERM to rank 1 alone") {
    PortLease lease;
    REQUIRE(lease.port() != 0);
    Rank zero(0, 2, lease.port(), args, log);
    Rank one(1, 2, lease.port(), args, dir / "rank1.log");
    REQUIRE(WaitForText(log, "epoch 1/", 120));
    one.Signal(SIGTERM);
    CHECK(one.Wait(120) == 130);
    CHECK(zero.Wait(120) == 130);
  }
  SECTION("Ctrl-C at the terminal: each rank gets it from the terminal and from scripts/launch.py") {
    std::vector<std::string> argv = {PYTHON_BIN, LAUNCH_PY, "--nproc", "2", "--ports", kLaunchPorts, "--"};
    for (std::string& a : RankArgv(args)) argv.push_back(std::move(a));
    Child launcher(argv, Environment(), log, /*own_group=*/true);
    REQUIRE(WaitForText(log, "epoch 1/", 120));
    launcher.SignalGroup(SIGINT);
    CHECK(launcher.Wait(120) == 130);
  }
  INFO(Slurp(log));
  const Json s = Summary(log);
  CHECK(s["world_size"] == 2);
  CHECK(s["steps"].get<uint64_t>() > 0);
  CHECK(std::filesystem::exists(dir / "out/last.pt"));
  CHECK_FALSE(MetricLines(dir / "out/metrics.jsonl").empty());
}

TEST_CASE("distributed: a rank that dies or hangs stops the others with an error naming it",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "data", false, 64).ok());
  PortLease lease;
  REQUIRE(lease.port() != 0);
  const double timeout = 5;
  const std::string args =
      TrainArgs(dir / "data", dir / "out", 16, 100000) + " --dist-timeout " + std::to_string(int(timeout));
  Rank zero(0, 2, lease.port(), args, dir / "rank0.log");
  Rank one(1, 2, lease.port(), args, dir / "rank1.log");
  REQUIRE(WaitForText(dir / "rank0.log", "epoch 1: train_loss", 120));  // both ranks train

  // `victim` gets `sig`; `survivor` must stop by itself with exit code 1: its log.
  auto survivor_stops = [&](Rank& victim, int sig, Rank& survivor, const std::string& log) {
    victim.Signal(sig);
    const int code = survivor.Wait(timeout + 60);
    INFO(Slurp(log));
    CHECK(code == 1);
    return Slurp(log);
  };
  // A store server that waits for the rest of a message answers no one meanwhile
  // (LibTorch 1.13's): rank 0, which hosts it, names the store then.
  const std::string store_waits =
      "the store this rank hosts at 127.0.0.1:" + std::to_string(lease.port()) + " does not answer";
  SECTION("killed") {
    CHECK_THAT(survivor_stops(one, SIGKILL, zero, dir / "rank0.log"), Catch::Contains("rank 1 gave no sign of life"));
  }
  SECTION("stopped: hangs without dying") {
    const std::string log = survivor_stops(one, SIGSTOP, zero, dir / "rank0.log");
    if (log.find(store_waits) != std::string::npos) {
      WARN("rank 1 stopped in the middle of a message to the store: " << log);
    } else {
      // Silent since the signal: through the whole --dist-timeout, not only the last heartbeats.
      const size_t at = log.find("rank 1 gave no sign of life for about ");
      REQUIRE(at != std::string::npos);
      CHECK(std::stod(log.substr(at + std::strlen("rank 1 gave no sign of life for about "))) >= timeout - 1);
    }
  }
  SECTION("stopped while the store waits for the rest of a message") {
    // One byte of a request, and no more, from a connection of its own.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(lease.port()));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0);
    const char half = 0;
    REQUIRE(send(fd, &half, 1, 0) == 1);
    const std::string log = survivor_stops(one, SIGSTOP, zero, dir / "rank0.log");
    close(fd);
    const bool named = log.find(store_waits) != std::string::npos ||
                       log.find("rank 1 gave no sign of life") != std::string::npos;  // a store that answers
    CHECK(named);
  }
  SECTION("rank 0, which hosts the store, killed") {
    CHECK_THAT(survivor_stops(zero, SIGKILL, one, dir / "rank1.log"), Catch::Contains("rank 0 is gone"));
  }
}

TEST_CASE("distributed: every option that changes the run is compared, and a difference names both values") {
  using Mutator = std::function<void(st::TrainOptions&)>;
  const std::vector<std::pair<std::string, Mutator>> cases = {
      {"--batch", [](st::TrainOptions& o) { o.batch_size = 32; }},
      {"--epochs", [](st::TrainOptions& o) { o.epochs = 9; }},
      {"--max-steps", [](st::TrainOptions& o) { o.max_steps = 7; }},
      {"--classes", [](st::TrainOptions& o) { o.num_classes = 3; }},
      {"--model", [](st::TrainOptions& o) { o.model.name = "cnn"; }},
      {"--train-split", [](st::TrainOptions& o) { o.train_split = "val"; }},
      {"--val-split", [](st::TrainOptions& o) { o.val_split = "test"; }},
      {"--bucket-mb", [](st::TrainOptions& o) { o.dist.bucket_mb = 1; }},
      {"--lr", [](st::TrainOptions& o) { o.optimizer.lr = 0.0031; }},
      {"--seed", [](st::TrainOptions& o) { o.seed = 4; }},
      {"--optimizer", [](st::TrainOptions& o) { o.optimizer.name = "sgd"; }},
      {"--order", [](st::TrainOptions& o) { o.order = SampleOrder::kSequential; }},
      {"--aug-p", [](st::TrainOptions& o) { o.nnunet.probability[0] = 0.5; }},
  };
  const st::TrainOptions base;
  const auto agreed = st::detail::AgreedOptions(base);
  CHECK(st::detail::Disagreement(agreed, st::detail::AgreedOptions(base), 1).empty());
  for (const auto& [flag, mutate] : cases) {
    st::TrainOptions other = base;
    other.threads = 7;  // a rank's own: not compared
    other.device = "cpu";
    mutate(other);
    INFO(flag);
    CHECK_THAT(st::detail::Disagreement(agreed, st::detail::AgreedOptions(other), 3),
               Catch::StartsWith("the ranks disagree on " + flag + ": '") && Catch::Contains("' on rank 3"));
  }
  auto fewer = agreed;
  fewer.pop_back();
  CHECK_THAT(st::detail::Disagreement(agreed, fewer, 1), Catch::Contains("different builds"));
}

TEST_CASE("distributed: ranks started with different options or datasets stop before training, saying what differs",
          "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "data", false, 64).ok());
  REQUIRE(testing::WriteClassFixture(dir / "other", false, 48).ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {TrainArgs(dir / "data", dir / "out", 32, 2), "the ranks disagree on --batch: '16' on rank 0, '32' on rank 1"},
      {TrainArgs(dir / "other", dir / "out", 16, 2), "the ranks disagree on the dataset: '160 samples"}};
  for (const auto& [args1, message] : cases) {
    INFO(args1);
    PortLease lease;
    REQUIRE(lease.port() != 0);
    const std::string args0 = TrainArgs(dir / "data", dir / "out", 16, 2) + " --dist-timeout 5";
    Rank zero(0, 2, lease.port(), args0, dir / "rank0.log");
    Rank one(1, 2, lease.port(), args1 + " --dist-timeout 5", dir / "rank1.log");
    CHECK(one.Wait(120) == 1);
    CHECK(zero.Wait(120) == 1);
    for (const std::string& log : {dir / "rank0.log", dir / "rank1.log"}) {
      INFO(Slurp(log));
      CHECK_THAT(Slurp(log), Catch::Contains(message));
    }
    CHECK_FALSE(std::filesystem::exists(dir / "out/metrics.jsonl"));
  }
}

TEST_CASE("distributed: a rank that fails tells the others why", "[subprocess][distributed][slow]") {
  testing::TempDir dir;
  REQUIRE(testing::WriteClassFixture(dir / "data", false, 64).ok());
  PortLease lease;
  REQUIRE(lease.port() != 0);
  // Rank 1 resumes from a damaged checkpoint; rank 0 waits for it at the first collective.
  std::ofstream(dir / "bad.pt") << "not a checkpoint";
  const std::string args = TrainArgs(dir / "data", dir / "out", 16, 2) + " --dist-timeout 30";
  Rank zero(0, 2, lease.port(), args, dir / "rank0.log");
  Rank one(1, 2, lease.port(), args + " --resume " + (dir / "bad.pt"), dir / "rank1.log");
  CHECK(one.Wait(120) == 1);
  CHECK(zero.Wait(120) == 1);
  INFO(Slurp(dir / "rank0.log"));
  CHECK_THAT(Slurp(dir / "rank0.log"), Catch::Contains("rank 1 stopped") && Catch::Contains("bad.pt"));
}

TEST_CASE("distributed: the launcher's environment and bad values", "[subprocess][slow]") {
  std::map<std::string, std::string> env = {{"RANK", "1"},
                                            {"WORLD_SIZE", "4"},
                                            {"LOCAL_RANK", "1"},
                                            {"LOCAL_WORLD_SIZE", "2"},
                                            {"MASTER_ADDR", "node0"},
                                            {"MASTER_PORT", "29501"},
                                            {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                            {"TORCHELASTIC_RESTART_COUNT", "2"},
                                            {"GLOO_SOCKET_IFNAME", "eth1"}};
  auto lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Result<st::DistributedOptions> d = st::DistributedFromEnvironment({}, lookup);
  REQUIRE(d.ok());
  CHECK(d->rank == 1);
  CHECK(d->world_size == 4);
  CHECK(d->local_rank == 1);
  CHECK(d->local_world_size == 2);
  CHECK(d->master_addr == "node0");
  CHECK(d->master_port == 29501);
  CHECK(d->agent_store);
  CHECK(d->restart_count == 2);
  CHECK(d->interface == "eth1");
  CHECK(st::CheckDistributedOptions(*d).ok());

  env["RANK"] = "one";
  CHECK_THAT(st::DistributedFromEnvironment({}, lookup).status().message(), Catch::Contains("RANK='one'"));
  env.erase("RANK");
  CHECK_THAT(st::DistributedFromEnvironment({}, lookup).status().message(), Catch::Contains("RANK is not"));
  env.clear();
  d = st::DistributedFromEnvironment({}, lookup);
  REQUIRE(d.ok());
  CHECK(d->world_size == 1);  // no launcher: one process

  st::DistributedOptions bad;
  bad.world_size = 2;
  bad.rank = 2;
  CHECK(st::CheckDistributedOptions(bad).code() == StatusCode::kInvalidArgument);
  bad.rank = 0;
  bad.backend = "mpi";
  CHECK_THAT(st::CheckDistributedOptions(bad).message(), Catch::Contains("mpi"));
  CHECK(Shell(std::string("RANK=x WORLD_SIZE=2 ") + SHARDTRAIN_BIN + " train /nonexistent >/dev/null 2>&1") == 2);
  CHECK(Shell(std::string(SHARDTRAIN_BIN) + " train /nonexistent --rank 3 --world-size 2 >/dev/null 2>&1") == 2);
  CHECK(Shell(std::string(SHARDTRAIN_BIN) + " train /nonexistent --dist-timeout 0 >/dev/null 2>&1") == 2);
}

TEST_CASE("distributed: evaluation shares and resume points") {
  using st::detail::OwnedSamples;
  // 10 samples over 4 ranks: positions 0..11 (10 and 11 wrap around), rank r takes r, r+4, r+8.
  CHECK(OwnedSamples(10, 0, 4) == 3);
  CHECK(OwnedSamples(10, 1, 4) == 3);
  CHECK(OwnedSamples(10, 2, 4) == 2);
  CHECK(OwnedSamples(10, 3, 4) == 2);
  CHECK(OwnedSamples(1, 1, 2) == 0);
  CHECK(OwnedSamples(7, 0, 1) == 7);

  st::CheckpointMeta m;
  m.epochs_done = 3;
  m.sampler = {2, 12};  // the end of epoch 3 (0-based 2) of 12 batches
  m.world_size = 2;
  std::string note;
  CHECK(st::detail::ResumePoint(m, 2, &note) == m.sampler);
  CHECK(note.empty());
  CHECK(st::detail::ResumePoint(m, 4, &note) == SamplerState{3, 0});
  CHECK_THAT(note, Catch::Contains("last epoch boundary") && Catch::Contains("epoch 4"));
  m.sampler = {3, 5};  // mid-epoch
  CHECK(st::detail::ResumePoint(m, 1, &note) == SamplerState{3, 0});
  CHECK_THAT(note, Catch::Contains("taken again"));
}
