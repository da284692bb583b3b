// Rewrites a dataset's manifest to claim more samples than its shards hold: a checksum-
// valid, self-consistent manifest that lies, as a hostile or damaged one can.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "format/layout.h"
#include "format/manifest.h"

namespace shardify::testing {

// Adds `extra` samples to the last shard, the last split and the total.
inline bool ClaimMoreSamples(const std::string& dir, uint64_t extra) {
  const std::string path = dir + "/" + kManifestFileName;
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Result<Manifest> m = DecodeManifestFile(bytes.data(), bytes.size(), path);
  if (!m.ok() || m->shards.empty() || m->splits.empty()) return false;
  m->shards.back().num_samples += extra;
  m->splits.back().num_samples += extra;
  m->num_samples += extra;
  const std::vector<uint8_t> out = EncodeManifestFile(*m);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return true;
}

}  // namespace shardify::testing
