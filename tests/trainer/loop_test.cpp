// End-to-end tests of Train and Predict on tiny datasets written with DatasetWriter.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../common/claims.h"
#include "../common/process.h"
#include "../common/skip.h"
#include "../common/temp_dir.h"
#include "../common/watchdog.h"
#include "catch_torch.h"
#include "fixtures.h"
#include "format/dataset.h"
#include "format/writer.h"
#include "trainer/loop_internal.h"
#include "trainer/train.h"

namespace st = shardify::trainer;
using namespace shardify;

namespace {

using testing::CountLines;
using testing::WriteClassFixture;
using testing::WriteSegFixture;

st::TrainOptions SmallRun(const std::string& data, const std::string& out, const std::string& model) {
  st::TrainOptions o;
  o.data_dir = data;
  o.out_dir = out;
  o.model.name = model;
  o.batch_size = 16;
  o.epochs = 3;
  o.threads = 2;
  o.optimizer.lr = 3e-3;
  o.seed = 5;
  return o;
}

}  // namespace

TEST_CASE("trainer: a short classification run lowers the loss and writes its reports") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  o.test_split = "test";
  uint64_t steps_seen = 0;
  o.progress_every = 4;
  o.on_step = [&](const st::StepInfo& s) {
    steps_seen += 1;
    CHECK(s.data_wait_fraction <= 1.0);
  };
  auto r = st::Train(o);
  REQUIRE(r.ok());
  REQUIRE(r->history.size() == 3);
  CHECK(r->history.back().train_loss < r->history.front().train_loss * 0.8);
  CHECK(r->epochs == 3);
  CHECK(r->best_metric_name == "val_accuracy");
  CHECK(r->best_metric > 0.6);  // chance is 0.25
  CHECK(r->data_wait_fraction >= 0.0);
  CHECK(r->data_wait_fraction < 1.0);
  CHECK(r->samples_per_s > 0);
  CHECK(steps_seen >= 3 * 3);
  CHECK(CountLines(dir / "out/metrics.jsonl") == 3);
  CHECK(std::filesystem::exists(dir / "out/curve.png"));
  CHECK(std::filesystem::exists(dir / "out/best.pt"));
  const std::string json = st::SummaryJson(*r);
  for (const char* key : {"\"epochs\":3", "\"seconds\"", "\"samples_per_s\"", "\"data_wait_fraction\"",
                          "\"best_metric\"", "\"metrics\"", "\"test_accuracy\""}) {
    CHECK_THAT(json, Catch::Contains(key));
  }
}

TEST_CASE("trainer: resume gives the same next steps as an uninterrupted run") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 96).ok());
  auto record = [](std::vector<double>& into) {
    return [&into](const st::StepInfo& s) {
      if (s.epoch == 1) into.push_back(s.last_step_loss);
    };
  };
  std::vector<double> straight, resumed;
  st::TrainOptions a = SmallRun(dir / "data", dir / "a", "cnn");
  a.epochs = 2;
  a.progress_every = 1;
  a.schedule.name = "onecycle";
  a.augment.flip_x = true;
  a.augment.rotate_deg = 10;
  a.on_step = record(straight);
  REQUIRE(st::Train(a).ok());
  // The same run stopped after its first epoch (6 batches), then resumed.
  st::TrainOptions b = a;
  b.out_dir = dir / "b";
  b.max_steps = 6;
  b.on_step = nullptr;
  auto first = st::Train(b);
  REQUIRE(first.ok());
  REQUIRE(first->epochs == 1);
  st::TrainOptions c = a;
  c.out_dir = dir / "b";
  c.resume = dir / "b/last.pt";
  c.on_step = record(resumed);
  auto r = st::Train(c);
  REQUIRE(r.ok());
  CHECK(r->epochs == 2);
  REQUIRE(straight.size() == 6);
  REQUIRE(resumed.size() == straight.size());
  for (size_t i = 0; i < straight.size(); ++i) {
    INFO("step " << i);
    CHECK(resumed[i] == Approx(straight[i]).epsilon(1e-5));
  }
}

TEST_CASE("trainer: images stored as [H, W] get a channel axis") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", true, 64).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "cnn");
  o.epochs = 1;
  auto r = st::Train(o);
  REQUIRE(r.ok());
  CHECK(std::isfinite(r->history.at(0).train_loss));
}

TEST_CASE("trainer: predict writes one CSV row per sample with class probabilities") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 64).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  o.epochs = 2;
  REQUIRE(st::Train(o).ok());
  st::PredictOptions p;
  p.checkpoint = dir / "out/best.pt";
  p.data_dir = dir / "data";
  p.split = "test";
  p.out = dir / "pred.csv";
  auto r = st::Predict(p);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->samples == 32);
  CHECK(CountLines(dir / "pred.csv") == 33);
  std::ifstream in(dir / "pred.csv");
  std::string header;
  std::getline(in, header);
  CHECK(header == "index,label,predicted,prob_tl,prob_tr,prob_bl,prob_br");
  REQUIRE(r->metrics.size() == 2);
  CHECK(r->metrics[0].first == "accuracy");
}

TEST_CASE("trainer: segmentation with UNet reports Dice and predicts mask shards") {
  testing::TempDir dir;
  REQUIRE(WriteSegFixture(dir / "data").ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "unet");
  o.model.unet_base_channels = 4;
  o.epochs = 4;
  o.optimizer.lr = 1e-2;
  o.augment.flip_x = o.augment.flip_y = true;
  auto r = st::Train(o);
  REQUIRE(r.ok());
  CHECK(r->best_metric_name == "val_dice");
  CHECK(r->history.back().train_loss < r->history.front().train_loss);
  CHECK(r->best_metric > 0.3);
  st::PredictOptions p;
  p.checkpoint = dir / "out/last.pt";
  p.data_dir = dir / "data";
  p.split = "val";
  p.out = dir / "masks";
  auto pr = st::Predict(p);
  REQUIRE(pr.ok());
  CHECK(pr->samples == 16);
  auto ds = Dataset::Open(dir / "masks");
  REQUIRE(ds.ok());
  CHECK((*ds)->num_samples() == 16);
  CHECK((*ds)->manifest().FindField("mask") >= 0);
}

TEST_CASE("trainer: bad inputs give errors that name the dataset") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 32).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  o.image_field = "pixels";
  auto r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("pixels"));
  CHECK_THAT(r.status().message(), Catch::Contains(dir / "data"));
  o = SmallRun(dir / "missing", dir / "out", "mlp");
  CHECK_FALSE(st::Train(o).ok());
  o = SmallRun(dir / "data", dir / "out", "mlp");
  o.optimizer.name = "rmsprop";
  CHECK(st::Train(o).status().code() == StatusCode::kInvalidArgument);
  // A class name that is not UTF-8 (written by a Writer, or a shardify before it refused
  // them) is refused before training, not when the first checkpoint is written.
  REQUIRE(WriteClassFixture(dir / "latin1", false, 32, {"tl", "caf\xE9", "bl", "br"}).ok());
  o = SmallRun(dir / "latin1", dir / "out", "mlp");
  const Result<st::TrainSummary> latin1 = st::Train(o);
  REQUIRE_FALSE(latin1.ok());
  CHECK(latin1.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(latin1.status().message(), Catch::Contains("class name 'caf\\xE9' is not UTF-8"));
  CHECK_FALSE(std::filesystem::exists(dir / "out/metrics.jsonl"));
}

TEST_CASE("trainer: an output directory that cannot be written is refused before the first epoch") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 32).ok());
  st::TrainOptions o = SmallRun(dir / "data", "/proc/self", "mlp");  // a directory no one, root included, writes in
  uint64_t epochs = 0;
  o.on_epoch = [&epochs](const st::EpochRecord&) { ++epochs; };
  const Result<st::TrainSummary> r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kIOError);
  CHECK_THAT(r.status().message(), Catch::StartsWith("output directory /proc/self is not writable"));
  CHECK(epochs == 0);
}

TEST_CASE("trainer: without a CUDA device, --device cuda is refused cleanly") {
  if (torch::cuda::is_available()) SHARDIFY_SKIP("a CUDA device answers; tests/cuda trains on it");
  auto device = st::detail::PickDevice("cuda");
  REQUIRE_FALSE(device.ok());
  CHECK(device.status().code() == StatusCode::kNotFound);
  CHECK(st::detail::PickDevice("auto")->is_cpu());
}

namespace {

// Fields of one RFC 4180 record read from `in` (quoted fields may hold commas, quotes
// and line breaks); empty at the end of the input.
std::vector<std::string> CsvRecord(std::istream& in) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false, any = false;
  for (int c; (c = in.get()) != EOF;) {
    any = true;
    if (quoted) {
      if (c == '"' && in.peek() == '"')
        field += char(in.get());
      else if (c == '"')
        quoted = false;
      else
        field += char(c);
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else if (c == '\n') {
      break;
    } else {
      field += char(c);
    }
  }
  if (any) fields.push_back(field);
  return fields;
}

// Runs shardtrain with `args`; its stderr goes to *err when given.
int Shardtrain(const std::string& args, std::string* err = nullptr) {
  std::string stderr_text;
  const int code = testing::Shell(std::string(SHARDTRAIN_BIN) + " " + args + " >/dev/null", &stderr_text);
  if (err != nullptr) *err = stderr_text;
  return code;
}

}  // namespace

TEST_CASE("trainer: a diverging run stops with an error reporting the NaN loss, without hanging") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 64).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  o.optimizer.lr = 1e30;
  o.epochs = 2;
  const Result<st::TrainSummary> r =
      testing::WithinSeconds(300, "training with --lr 1e30", [&o] { return st::Train(o); });
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains("diverged") && Catch::Contains("epoch 1") &&
                                       Catch::Contains("--lr") && (Catch::Contains("NaN") || Catch::Contains("inf")));
  CHECK_FALSE(std::filesystem::exists(dir / "out/last.pt"));  // nothing saved from NaN weights
  CHECK_FALSE(std::filesystem::exists(dir / "out/best.pt"));
}

TEST_CASE("trainer: training on a split without labels is an error") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 32, {"tl", "tr", "bl", "br"}, true).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  auto r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains("split 'train'") && Catch::Contains("no labels"));
  o.train_split = "val";  // labeled
  o.val_split = "test";
  o.epochs = 1;
  CHECK(st::Train(o).ok());
}

TEST_CASE("trainer: a manifest claiming more samples than its shards hold is refused before allocating") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 32).ok());
  REQUIRE(testing::ClaimMoreSamples(dir / "data", uint64_t{1} << 36));  // into split "test"
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  o.train_split = "test";
  o.val_split = "";
  auto r = st::Train(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kCorruption);
  CHECK_THAT(r.status().message(), Catch::Contains("claims"));
}

TEST_CASE("trainer: resume refuses another optimizer and a damaged checkpoint, saying why") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 64).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  o.epochs = 1;
  REQUIRE(st::Train(o).ok());
  o.epochs = 2;
  o.resume = dir / "out/last.pt";
  o.optimizer.name = "sgd";
  auto other = st::Train(o);
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(other.status().message(), Catch::Contains("--optimizer adam") && Catch::Contains("--optimizer sgd"));
  o.optimizer.name = "adam";
  std::vector<char> bytes;
  {
    std::ifstream in(dir / "out/last.pt", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(dir / "out/flipped.pt", std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  o.resume = dir / "out/flipped.pt";
  auto damaged = st::Train(o);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == StatusCode::kCorruption);
  CHECK_THAT(damaged.status().message(), Catch::Contains("flipped.pt") && Catch::Contains("checksum"));
  o.resume = dir / "out/last.pt";
  CHECK(st::Train(o).ok());
}

TEST_CASE("trainer: predict quotes class names with commas, quotes and line breaks (RFC 4180)") {
  testing::TempDir dir;
  const std::vector<std::string> classes = {"a,b", "say \"hi\"", "two\nlines", "plain"};
  REQUIRE(WriteClassFixture(dir / "data", false, 64, classes).ok());
  st::TrainOptions o = SmallRun(dir / "data", dir / "out", "mlp");
  o.epochs = 1;
  REQUIRE(st::Train(o).ok());
  st::PredictOptions p;
  p.checkpoint = dir / "out/last.pt";
  p.data_dir = dir / "data";
  p.split = "test";
  p.out = dir / "pred.csv";
  REQUIRE(st::Predict(p).ok());
  CHECK_FALSE(std::filesystem::exists(dir / "pred.csv.tmp"));
  std::ifstream in(dir / "pred.csv", std::ios::binary);
  CHECK(CsvRecord(in) == std::vector<std::string>{"index", "label", "predicted", "prob_a,b", "prob_say \"hi\"",
                                                  "prob_two\nlines", "prob_plain"});
  size_t rows = 0;
  for (std::vector<std::string> r; !(r = CsvRecord(in)).empty(); ++rows) CHECK(r.size() == 7);
  CHECK(rows == 32);
}

// The usage rules themselves are tested in-process (cli_test.cpp); this checks the exit
// codes and the messages of the program.
TEST_CASE("trainer: shardtrain exits 2 on usage errors, 1 on failed runs", "[subprocess][slow]") {
  testing::TempDir dir;
  REQUIRE(WriteClassFixture(dir / "data", false, 32).ok());
  const std::string run = "train " + dir / "data" + " -q -o " + dir / "out" + " -e 1 ";
  std::string usage;
  CHECK(Shardtrain(run + "--batch 100000000", &usage) == 2);
  CHECK_THAT(usage,
             Catch::Contains("shardtrain: ") && Catch::Contains("at most 65536") && Catch::Contains("Run with --help"));
  CHECK(Shardtrain("train " + dir / "missing" + " -q -o " + dir / "out") == 1);
  REQUIRE(Shardtrain(run) == 0);
  const std::string predict = "predict " + dir / "out/last.pt" + " " + dir / "data" + " -o " + dir / "p.csv ";
  CHECK(Shardtrain(predict + "--batch 0") == 2);
  CHECK(Shardtrain(predict + "--split nowhere") == 1);
  CHECK(Shardtrain(predict + "--io pread") == 0);
  CHECK(Shardtrain(predict) == 0);
  // Cut just before its trailer, a checkpoint is refused unless --legacy-checkpoint asks for one without.
  {
    std::vector<char> bytes;
    std::ifstream in(dir / "out/last.pt", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
    std::ofstream(dir / "bare.pt", std::ios::binary).write(bytes.data(), std::streamsize(bytes.size() - 16));
  }
  const std::string bare = "predict " + dir / "bare.pt" + " " + dir / "data" + " -o " + dir / "b.csv ";
  std::string refused;
  CHECK(Shardtrain(bare, &refused) == 1);
  CHECK_THAT(refused, Catch::Contains("bare.pt: no checksum trailer") && Catch::Contains("--legacy-checkpoint"));
  CHECK(Shardtrain(bare + "--legacy-checkpoint") == 0);
  // A truncated checkpoint: one line naming it, no C++ backtrace, for --resume and predict.
  std::filesystem::copy_file(dir / "out/last.pt", dir / "cut.pt");
  std::filesystem::resize_file(dir / "cut.pt", std::filesystem::file_size(dir / "cut.pt") / 2);
  for (const std::string& args :
       {"train " + dir / "data" + " -q -o " + dir / "out" + " -e 2 --resume " + dir / "cut.pt",
        "predict " + dir / "cut.pt" + " " + dir / "data" + " -o " + dir / "q.csv"}) {
    std::string err;
    CHECK(Shardtrain(args, &err) == 1);
    INFO(err);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.find("cut.pt") != std::string::npos);
  }
}
