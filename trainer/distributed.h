// Distributed training: which process group a shardtrain process joins.
//
// A run of N processes ("ranks") trains one model: each rank reads its own part of every
// epoch (the Loader's rank / world_size), gradients are averaged across ranks, and
// validation is split across ranks with the metrics reduced. The engine is PyTorch's c10d
// from LibTorch: a c10d::TCPStore for the rendezvous, Gloo on the CPU, NCCL on CUDA
// (one device per local rank) where LibTorch has it.
//
// Ranks are launched the way torchrun, Slurm or a Kubernetes PyTorchJob launch them:
// each process finds its place in the environment (env://) or in explicit options.
// This header holds only the options; the process group itself is internal to Train.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"

namespace shardify::trainer {

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;                     // 1: a single process, no process group
  int local_rank = 0;                     // rank on this machine: CUDA device cuda:<local_rank>
  int local_world_size = 1;               // ranks on this machine: they share its cores
  std::string master_addr = "127.0.0.1";  // host of the rendezvous store
  int master_port = 29500;
  // The launcher hosts the store (torchrun's agent store, scripts/launch.py): every rank is a
  // client and keys live under "/worker/attempt_<restart>". Otherwise rank 0 hosts it.
  bool agent_store = false;
  int restart_count = 0;         // torchrun's TORCHELASTIC_RESTART_COUNT
  std::string interface;         // network interface Gloo binds to (GLOO_SOCKET_IFNAME);
                                 // empty: loopback when the store is on loopback, else
                                 // the address this machine's host name resolves to
  std::string backend = "auto";  // auto (nccl on CUDA when built with it, else gloo) | gloo | nccl
  // A rank that has not answered a collective (or the rendezvous) after this long is
  // given up on: every other rank stops with an error naming it.
  double timeout_s = 300;
  double bucket_mb = 25;  // gradient all-reduce bucket size (MiB)
};

// Returns the value of an environment variable, or null when unset (std::getenv in a CLI;
// tests pass their own).
using EnvLookup = std::function<const char*(const char* name)>;

// `base` with the fields the launcher's environment sets: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE,
// TORCHELASTIC_RESTART_COUNT and GLOO_SOCKET_IFNAME (torchrun sets them all; a PyTorchJob sets the first two and
// the master's address). Unset variables keep base's values. InvalidArgument names a
// variable that is not a number (or RANK without WORLD_SIZE).
Result<DistributedOptions> DistributedFromEnvironment(DistributedOptions base, const EnvLookup& env);

// InvalidArgument for values no run can use: world_size < 1, rank outside [0, world_size),
// a negative local rank, local_world_size < 1, a port outside 1..65535, an unknown backend,
// timeout <= 0, bucket size <= 0.
Status CheckDistributedOptions(const DistributedOptions& options);

}  // namespace shardify::trainer
