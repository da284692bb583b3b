#include "format/layout.h"

#include <cstdio>
#include <cstring>

#include "base/checksum.h"

namespace shardify {

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void EncodeFileHeader(const FileHeader& h, uint8_t out[16]) {
  std::memcpy(out, h.magic.data(), 8);
  PutU32(out + 8, h.version);
  PutU32(out + 12, h.flags);
}

FileHeader DecodeFileHeader(const uint8_t in[16]) {
  FileHeader h;
  std::memcpy(h.magic.data(), in, 8);
  h.version = GetU32(in + 8);
  h.flags = GetU32(in + 12);
  return h;
}

bool ShardFooter::operator==(const ShardFooter& o) const {
  return index_offset == o.index_offset && index_length == o.index_length && index_checksum == o.index_checksum &&
         version == o.version && flags == o.flags && footer_checksum == o.footer_checksum;
}

namespace {
uint64_t FooterChecksum(const uint8_t header[16], const uint8_t footer_head[32]) {
  uint8_t buf[48];
  std::memcpy(buf, header, 16);
  std::memcpy(buf + 16, footer_head, 32);
  return Checksum64(buf, sizeof buf);
}
}  // namespace

void EncodeShardFooter(const ShardFooter& f, const uint8_t header[16], uint8_t out[48]) {
  PutU64(out + 0, f.index_offset);
  PutU64(out + 8, f.index_length);
  PutU64(out + 16, f.index_checksum);
  PutU32(out + 24, f.version);
  PutU32(out + 28, f.flags);
  PutU64(out + 32, FooterChecksum(header, out));
  std::memcpy(out + 40, kShardMagic.data(), 8);
}

ShardFooter DecodeShardFooter(const uint8_t in[48]) {
  ShardFooter f;
  f.index_offset = GetU64(in + 0);
  f.index_length = GetU64(in + 8);
  f.index_checksum = GetU64(in + 16);
  f.version = GetU32(in + 24);
  f.flags = GetU32(in + 28);
  f.footer_checksum = GetU64(in + 32);
  return f;
}

std::string Hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Status CheckShardEnds(const uint8_t header[16], const uint8_t footer[48], uint64_t file_size, const std::string& path) {
  if (file_size < kShardHeaderSize + kShardFooterSize)
    return Corruption(path + ": " + std::to_string(file_size) + " bytes is too small for a shard (at least " +
                      std::to_string(kShardHeaderSize + kShardFooterSize) + ")");
  if (std::memcmp(header, kShardMagic.data(), 8) != 0)
    return Corruption(path + ": bad head magic (not a shardify shard)");
  if (std::memcmp(footer + 40, kShardMagic.data(), 8) != 0)
    return Corruption(path + ": bad tail magic (truncated or not a shardify shard)");
  const FileHeader h = DecodeFileHeader(header);
  const ShardFooter f = DecodeShardFooter(footer);
  const uint64_t expect = FooterChecksum(header, footer);
  if (f.footer_checksum != expect)
    return Corruption(path + ": footer checksum mismatch: expected " + Hex64(expect) + ", found " +
                      Hex64(f.footer_checksum));
  if (h.version != f.version)
    return Corruption(path + ": header version " + std::to_string(h.version) + " differs from footer version " +
                      std::to_string(f.version));
  if (f.version == 0 || f.version > kFormatVersion)
    return Unsupported(path + ": format version " + std::to_string(f.version) +
                       " is not supported (this reader knows 1.." + std::to_string(kFormatVersion) + ")");
  if ((h.flags & ~kKnownShardFlags) != 0 || (f.flags & ~kKnownShardFlags) != 0)
    return Unsupported(path + ": reserved flag bits set (header " + Hex64(h.flags) + ", footer " + Hex64(f.flags) +
                       ")");
  const uint64_t footer_at = file_size - kShardFooterSize;
  if (f.index_offset < kShardHeaderSize || f.index_offset % kIndexAlignment != 0 || f.index_offset > footer_at ||
      f.index_length != footer_at - f.index_offset)
    return Corruption(path + ": index at offset " + std::to_string(f.index_offset) + " length " +
                      std::to_string(f.index_length) + " does not end at the footer (offset " +
                      std::to_string(footer_at) + ")");
  return Status::Ok();
}

std::string ShardFileName(uint64_t n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "shard-%05llu%s", static_cast<unsigned long long>(n), kShardFileSuffix);
  return buf;
}

}  // namespace shardify
