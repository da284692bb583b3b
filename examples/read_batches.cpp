// Streams a split of a dataset as shuffled batches with the public Loader (reader/loader.h):
// the shape of a C++ training loop's input. Counts the batches and samples of 2 epochs and
// each label's share; with the dataset write_dataset makes, checks that every training
// sample came once per epoch. Usage: read_batches [DIR] [SPLIT] (default: example-dataset train).
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "base/status.h"
#include "reader/loader.h"

namespace {

using namespace shardify;

Status ReadBatches(const std::string& dir, const std::string& split) {
  LoaderOptions o;
  o.split = split;
  o.batch_size = 64;
  o.sampler.seed = 1;
  o.sampler.epochs = 2;
  ASSIGN_OR_RETURN(auto loader, Loader::Open(dir, o));
  uint64_t batches = 0, samples = 0;
  std::map<int64_t, uint64_t> labels;
  std::map<uint64_t, uint64_t> seen;  // sample index -> times read
  while (true) {
    ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
    if (!batch) break;  // every epoch done
    const BatchField* label = batch->Find("label");
    if (label == nullptr) return InvalidArgument(dir + " has no field 'label'");
    const auto* values = static_cast<const int64_t*>(label->data);  // i64 [B]
    for (size_t i = 0; i < batch->indices.size(); ++i) {
      ++labels[values[i]];
      ++seen[batch->indices[i]];
    }
    ++batches;
    samples += batch->indices.size();
  }  // dropping a batch hands its buffer back to the Loader
  for (const auto& [index, times] : seen) {
    if (times != 2)
      return Internal("sample " + std::to_string(index) + " was read " + std::to_string(times) + " times");
  }
  std::printf("read %llu batches, %llu samples (%zu distinct) of split %s in 2 epochs\n",
              static_cast<unsigned long long>(batches), static_cast<unsigned long long>(samples), seen.size(),
              split.c_str());
  for (const auto& [label, n] : labels) {
    std::printf("  label %lld: %llu\n", static_cast<long long>(label), static_cast<unsigned long long>(n));
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "example-dataset";
  const std::string split = argc > 2 ? argv[2] : "train";
  const Status s = ReadBatches(dir, split);
  if (!s.ok()) {
    std::fprintf(stderr, "read_batches: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
