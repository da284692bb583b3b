// Fuzz target: open a dataset made of one manifest and one shard, then read every sample.
//
// Input: [u8 mode][u32 manifest length][manifest bytes][shard bytes]. With mode bit 0 set,
// the harness repairs checksums, sizes and lengths first, so that mutations reach the
// structural checks behind them (verifier, offsets, shapes, codecs) instead of stopping
// at the first checksum. A file named by the environment variable SHARDIFY_FUZZ_SEED
// receives a valid seed input when the binary runs with -runs=0 and the variable set.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/checksum.h"
#include "base/file.h"
#include "format/dataset.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/writer.h"

using namespace shardify;
using Bytes = std::vector<uint8_t>;

namespace {

std::string WorkDir() {
  static std::string dir = [] {
    std::string tmpl = "/tmp/shardify-fuzz-XXXXXX";
    return std::string(::mkdtemp(tmpl.data()) ? tmpl.c_str() : "/tmp");
  }();
  return dir;
}

void RepairShard(Bytes* shard) {
  if (shard->size() < kShardHeaderSize + kShardFooterSize) return;
  uint8_t* footer = shard->data() + shard->size() - kShardFooterSize;
  ShardFooter f = DecodeShardFooter(footer);
  const uint64_t footer_at = shard->size() - kShardFooterSize;
  if (f.index_offset <= footer_at) {
    f.index_length = footer_at - f.index_offset;
    f.index_checksum = Checksum64(shard->data() + f.index_offset, f.index_length);
  }
  EncodeShardFooter(f, shard->data(), footer);
}

void RepairManifest(Bytes* manifest, const Bytes& shard) {
  if (manifest->size() < kManifestHeaderSize + kManifestTrailerSize) return;
  uint8_t* trailer = manifest->data() + manifest->size() - kManifestTrailerSize;
  const uint64_t body = manifest->size() - kManifestHeaderSize - kManifestTrailerSize;
  PutU64(trailer, body);
  PutU64(trailer + 8, Checksum64(manifest->data(), kManifestHeaderSize + body));
  auto m = DecodeManifestFile(manifest->data(), manifest->size(), "m");
  if (!m.ok() || m->shards.empty()) return;
  m->shards[0].size_bytes = shard.size();
  if (shard.size() >= kShardFooterSize)
    m->shards[0].index_checksum = DecodeShardFooter(shard.data() + shard.size() - kShardFooterSize).index_checksum;
  *manifest = EncodeManifestFile(*m);
}

void ReadAll(const std::string& dir) {
  ReadOptions ro;
  ro.max_sample_bytes = 1 << 24;
  auto ds = Dataset::Open(dir, ro);
  if (!ds.ok()) return;
  Decoder d;
  Bytes buf;
  for (uint64_t i = 0; i < (*ds)->num_samples() && i < 4096; ++i) {
    auto v = (*ds)->Sample(i);
    if (!v.ok()) return;
    for (size_t f = 0; f < (*ds)->manifest().fields.size(); ++f) {
      auto b = v->blob(f);
      if (b.ok()) {
        buf.resize(b->raw_size);
        v->Decode(f, buf.data(), buf.size(), d).IgnoreError();
        v->shape(f).status().IgnoreError();
      }
      v->int_value(f).status().IgnoreError();
      v->float_value(f).status().IgnoreError();
      v->bytes_value(f).status().IgnoreError();
    }
  }
}

void WriteSeed(const char* path) {
  const std::string dir = WorkDir() + "/seed";
  WriterOptions o;
  o.fsync = false;
  std::vector<FieldSpec> fields = {{"image", FieldKind::kNdarray, DType::kU8, {-1, 4}, {}, {}},
                                   {"label", FieldKind::kInt, DType::kU8, {}, {}, {}},
                                   {"path", FieldKind::kString, DType::kU8, {}, {}, {}}};
  auto w = DatasetWriter::Create(dir, fields, o);
  if (!w.ok()) return;
  for (int i = 0; i < 3; ++i) {
    SampleInput s;
    s.values = {FieldValue::Array(Bytes(4 * (i + 1), static_cast<uint8_t>(i)), {i + 1, 4}), FieldValue::Int(i),
                FieldValue::String("p" + std::to_string(i))};
    if (!(*w)->Append(std::move(s)).ok()) return;
  }
  if (!(*w)->Finish().ok()) return;
  Bytes m = *ReadWholeFile(dir + "/" + kManifestFileName, 1 << 20);
  Bytes s = *ReadWholeFile(dir + "/shard-00000.sfs", 1 << 20);
  Bytes out = {1, 0, 0, 0, 0};
  PutU32(out.data() + 1, static_cast<uint32_t>(m.size()));
  out.insert(out.end(), m.begin(), m.end());
  out.insert(out.end(), s.begin(), s.end());
  WriteFileAtomic(path, out.data(), out.size(), false).IgnoreError();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (const char* seed = std::getenv("SHARDIFY_FUZZ_SEED")) {
    static bool written = false;
    if (!written) WriteSeed(seed);
    written = true;
  }
  if (size < 5) return 0;
  const uint8_t mode = data[0];
  const uint64_t mlen = GetU32(data + 1);
  if (mlen > size - 5) return 0;
  Bytes manifest(data + 5, data + 5 + mlen), shard(data + 5 + mlen, data + size);
  if (mode & 1) {
    RepairShard(&shard);
    RepairManifest(&manifest, shard);
  }
  const std::string dir = WorkDir() + "/case";
  MakeDirs(dir).IgnoreError();
  WriteFileAtomic(dir + "/" + kManifestFileName, manifest.data(), manifest.size(), false).IgnoreError();
  WriteFileAtomic(dir + "/shard-00000.sfs", shard.data(), shard.size(), false).IgnoreError();
  ReadAll(dir);
  return 0;
}
