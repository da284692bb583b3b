// The reader's CUDA paths on a device: pinned slots, staged copies, and the ordering
// between the Loader's copy stream and a consumer's stream in both directions.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "reader/loader.h"
#include "tests/common/skip.h"
#include "tests/common/temp_dir.h"
#include "tests/reader/reader_fixtures.h"

namespace shardify {
namespace {

using testing::FixtureOptions;
using testing::TempDir;

#define SKIP_WITHOUT_DEVICE() \
  if (!CudaDeviceAvailable()) SHARDIFY_SKIP("no CUDA device answers")

// True when `p` is page-locked memory from cudaHostAlloc (cudaHostGetFlags answers only for
// such memory; the error it leaves for other memory is cleared).
bool Pinned(const void* p) {
  unsigned int flags = 0;
  const bool pinned = cudaHostGetFlags(&flags, const_cast<void*>(p)) == cudaSuccess;
  cudaGetLastError();
  return pinned;
}

// Holds a stream busy for 20 ms: work queued after it waits on the device.
void CUDART_CB Sleep20ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

struct DeviceCopy {
  void* data = nullptr;
  std::vector<uint8_t> expected;
};

TEST_CASE("cuda: slots are pinned host memory (pageable with pin_memory off)") {
  SKIP_WITHOUT_DEVICE();
  TempDir tmp;
  REQUIRE(testing::WriteFixture(tmp / "ds", FixtureOptions{}).ok());
  for (const bool pin : {true, false}) {
    LoaderOptions o;
    o.batch_size = 16;
    o.pin_memory = pin;
    auto loader = Loader::Open(tmp / "ds", o);
    REQUIRE(loader.ok());
    auto b = (*loader)->Next();
    REQUIRE(b.ok());
    CHECK((*b)->pinned == pin);
    CHECK((*b)->device_ready_event == nullptr);
    for (const BatchField& f : (*b)->fields) {
      CHECK(Pinned(f.data) == pin);
      CHECK(f.device_data == nullptr);
    }
  }
}

TEST_CASE("cuda: staged batches hold the host bytes on the device") {
  SKIP_WITHOUT_DEVICE();
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 200;
  fx.variable = true;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 16;
  o.stage_to_device = true;
  auto loader = Loader::Open(tmp / "ds", o);
  REQUIRE(loader.ok());
  size_t batches = 0;
  while (true) {
    auto b = (*loader)->Next();
    REQUIRE(b.ok());
    if (!*b) break;
    ++batches;
    CHECK((*b)->pinned);
    for (const BatchField& f : (*b)->fields) CHECK(Pinned(f.data));
    REQUIRE((*b)->device_ready_event != nullptr);
    REQUIRE(cudaEventSynchronize(static_cast<cudaEvent_t>((*b)->device_ready_event)) == cudaSuccess);
    for (const BatchField& f : (*b)->fields) {
      REQUIRE(f.device_data != nullptr);
      std::vector<uint8_t> back(f.bytes);
      REQUIRE(cudaMemcpy(back.data(), f.device_data, f.bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(std::memcmp(back.data(), f.data, f.bytes) == 0);
    }
  }
  CHECK(batches == 13);
}

// The consumer never blocks the host: its stream waits for each copy (StreamWaitForBatch),
// is then held busy, copies the batch's device bytes away, and the batch is released at
// once with consumer_stream set. With two slots the Loader refills each slot while that
// work is still queued; only the event recorded at release keeps the refill from
// overwriting bytes the consumer has not read yet.
TEST_CASE("cuda: copies wait for the consumer's queued work and the consumer's work waits for the copies") {
  SKIP_WITHOUT_DEVICE();
  TempDir tmp;
  FixtureOptions fx;
  fx.samples = 240;
  fx.side = 64;
  fx.random = true;
  REQUIRE(testing::WriteFixture(tmp / "ds", fx).ok());
  LoaderOptions o;
  o.batch_size = 16;
  o.prefetch = 1;
  o.threads = 2;
  o.stage_to_device = true;
  o.fields = {"image", "label"};
  auto loader = Loader::Open(tmp / "ds", o);
  REQUIRE(loader.ok());
  cudaStream_t consumer = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking) == cudaSuccess);
  std::vector<DeviceCopy> copies;
  while (true) {
    auto next = (*loader)->Next();
    REQUIRE(next.ok());
    std::shared_ptr<Batch> b = std::move(next).value();
    if (!b) break;
    REQUIRE(StreamWaitForBatch(*b, consumer).ok());
    REQUIRE(cudaLaunchHostFunc(consumer, Sleep20ms, nullptr) == cudaSuccess);
    for (const BatchField& f : b->fields) {
      DeviceCopy c;
      REQUIRE(cudaMalloc(&c.data, f.bytes) == cudaSuccess);
      c.expected.assign(static_cast<const uint8_t*>(f.data), static_cast<const uint8_t*>(f.data) + f.bytes);
      REQUIRE(cudaMemcpyAsync(c.data, f.device_data, f.bytes, cudaMemcpyDeviceToDevice, consumer) == cudaSuccess);
      copies.push_back(std::move(c));
    }
    b->consumer_stream = consumer;
    b.reset();  // released while the consumer's copies are still queued
  }
  REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
  REQUIRE(copies.size() == 2 * 15);
  size_t differing = 0;
  for (DeviceCopy& c : copies) {
    std::vector<uint8_t> back(c.expected.size());
    REQUIRE(cudaMemcpy(back.data(), c.data, back.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    differing += back != c.expected;
    cudaFree(c.data);
  }
  CHECK(differing == 0);
  cudaStreamDestroy(consumer);
}

TEST_CASE("cuda: StreamWaitForBatch refuses a batch that was not staged") {
  SKIP_WITHOUT_DEVICE();
  TempDir tmp;
  REQUIRE(testing::WriteFixture(tmp / "ds", FixtureOptions{}).ok());
  LoaderOptions o;
  o.batch_size = 8;
  auto loader = Loader::Open(tmp / "ds", o);
  REQUIRE(loader.ok());
  auto b = (*loader)->Next();
  REQUIRE(b.ok());
  CHECK(StreamWaitForBatch(**b, nullptr).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardify
