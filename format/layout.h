// Byte layout constants and the fixed-size structures of a shard and a manifest file.
// Every name here mirrors a row of FORMAT.md; a change of bytes changes both.
// All integers are little-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace shardify {

// Newest format version this library reads and writes. Each dataset is written as the
// oldest version that can hold it: version 1 without chunked or filtered fields
// (byte-identical to what version-1 writers produce), 2 with a chunked field, 3 with a
// byte-shuffled field, 4 with a delta-columns field.
inline constexpr uint32_t kFormatVersion = 4;
inline constexpr uint32_t kFormatVersionChunks = 2;        // first version with chunked fields
inline constexpr uint32_t kFormatVersionFilters = 3;       // first version with field filters
inline constexpr uint32_t kFormatVersionDeltaColumns = 4;  // first version with delta columns

// PNG-style magics: a high-bit byte, the name, CR LF, ^Z, LF (FORMAT.md 2).
inline constexpr std::array<uint8_t, 8> kShardMagic = {0x89, 'S', 'F', 'S', 0x0D, 0x0A, 0x1A, 0x0A};
inline constexpr std::array<uint8_t, 8> kManifestMagic = {0x89, 'S', 'F', 'M', 0x0D, 0x0A, 0x1A, 0x0A};

inline constexpr char kManifestFileName[] = "manifest.sfm";
// How a user asks for a dataset to be replaced, for the messages that refuse to without it.
inline constexpr char kOverwriteHint[] = "--overwrite on the command line, overwrite=True in Python";
// A dataset converted in parts (FORMAT.md section 6): part K of N is written to
// parts/KKKKK-of-NNNNN/ inside the dataset directory, its manifest named part.sfm.
inline constexpr char kPartManifestFileName[] = "part.sfm";
inline constexpr char kPartsDirName[] = "parts";
inline constexpr uint32_t kMaxParts = 99999;  // part directory names have five digits
inline constexpr char kShardFileSuffix[] = ".sfs";
inline constexpr char kTempSuffix[] = ".tmp";

inline constexpr size_t kShardHeaderSize = 16;
inline constexpr size_t kShardFooterSize = 48;
inline constexpr size_t kManifestHeaderSize = 16;
inline constexpr size_t kManifestTrailerSize = 24;
inline constexpr uint64_t kBlobAlignment = 64;  // every raw blob starts at a multiple of this
inline constexpr uint64_t kIndexAlignment = 8;  // the index starts at a multiple of this
// Every sample takes at least this many bytes per field in its shard's index (an int, a
// float, a data offset or chunk start; a blob reference takes more), so a shard of S
// bytes holds at most (S - 64) / (8 x fields) samples (FORMAT.md 3.3).
inline constexpr uint64_t kMinIndexBytesPerField = 8;

// Flag bits (FORMAT.md 3.4): none is defined yet; every bit is reserved and must be zero.
inline constexpr uint32_t kKnownShardFlags = 0;

// Codec of one stored blob (FORMAT.md 3.2, 3.3).
enum class Codec : uint8_t {
  kRaw = 0,       // the stored bytes are the array
  kZstd = 1,      // one zstd frame
  kZstdDict = 2,  // one zstd frame compressed with the field's dictionary
};
// "raw", "zstd", "zstd+dict"; "?" for a value that is not a codec. What each codec is and
// how it codes is its row in the codec table (format/codec.cpp).
const char* CodecName(Codec c);

// Bytes [0, 16) of a shard and of a manifest file.
struct FileHeader {
  std::array<uint8_t, 8> magic{};
  uint32_t version = 0;
  uint32_t flags = 0;
  bool operator==(const FileHeader& o) const { return magic == o.magic && version == o.version && flags == o.flags; }
};
void EncodeFileHeader(const FileHeader& h, uint8_t out[16]);
FileHeader DecodeFileHeader(const uint8_t in[16]);

// The last 48 bytes of a shard.
struct ShardFooter {
  uint64_t index_offset = 0;
  uint64_t index_length = 0;
  uint64_t index_checksum = 0;  // XXH3-64 of the index bytes
  uint32_t version = 0;
  uint32_t flags = 0;
  uint64_t footer_checksum = 0;  // XXH3-64 of header[0,16) || footer[0,32)
  bool operator==(const ShardFooter& o) const;
};
// Writes the footer including its tail magic; fills footer_checksum from `header`.
void EncodeShardFooter(const ShardFooter& f, const uint8_t header[16], uint8_t out[48]);
// Decodes without checking anything; see CheckShardEnds.
ShardFooter DecodeShardFooter(const uint8_t in[48]);

// Checks both magics, the footer checksum, version and flags, and that the index lies
// between header and footer in a file of `file_size` bytes. `path` names the file in errors.
Status CheckShardEnds(const uint8_t header[16], const uint8_t footer[48], uint64_t file_size, const std::string& path);

// File name of shard number `n`: "shard-00042.sfs", at least five digits ("shard-123456.sfs").
// Names sort as text in shard order only up to shard 99999; readers take the order of
// shards from the manifest, never from their names.
std::string ShardFileName(uint64_t n);

// "0x" and 16 hex digits, as checksums appear in error messages.
std::string Hex64(uint64_t v);

// Little-endian helpers.
void PutU32(uint8_t* p, uint32_t v);
void PutU64(uint8_t* p, uint64_t v);
uint32_t GetU32(const uint8_t* p);
uint64_t GetU64(const uint8_t* p);

}  // namespace shardify
