// The codec table: every Codec value has one row, and every row round-trips through
// EncodeBlob / DecodeBlob and refuses a blob that is not its own.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "fixtures.h"
#include "format/codec_internal.h"
#include "format/layout.h"

using namespace shardify;
using Bytes = std::vector<uint8_t>;

namespace {

// A few kilobytes that compress well but not to nothing, and a dictionary trained on
// samples like it.
Bytes Sample(int seed) {
  Bytes b(4096);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>((i / 16 + static_cast<size_t>(seed)) % 7);
  return b;
}

std::shared_ptr<const detail::Dictionary> TrainedDictionary() {
  std::vector<Bytes> samples;
  for (int i = 0; i < 64; ++i) samples.push_back(Sample(i));
  auto bytes = detail::TrainDictionary(samples, 1024);
  REQUIRE(bytes.ok());
  auto dict = detail::Dictionary::Create(*bytes, 3);
  REQUIRE(dict.ok());
  return *dict;
}

}  // namespace

TEST_CASE("codec table: one row per Codec value, with a distinct name") {
  std::set<std::string> names;
  for (Codec c : {Codec::kRaw, Codec::kZstd, Codec::kZstdDict}) {
    const detail::CodecSpec* spec = detail::FindCodec(c);
    REQUIRE(spec != nullptr);
    CHECK(spec->codec == c);
    CHECK(std::string(CodecName(c)) == spec->name);
    CHECK(names.insert(spec->name).second);
    // A dictionary variant is a row too, and uses a dictionary unless it is the codec itself.
    const detail::CodecSpec* with = detail::FindCodec(spec->with_dictionary);
    REQUIRE(with != nullptr);
    CHECK((with->uses_dictionary || with == spec));
  }
  for (size_t k = 0; k < detail::kCodecCount; ++k) CHECK(static_cast<size_t>(detail::kCodecs[k].codec) == k);
  CHECK(detail::kCodecCount == 3);
  CHECK(detail::FindCodec(uint8_t{3}) == nullptr);
  CHECK(detail::FindCodec(uint8_t{255}) == nullptr);
  CHECK(std::string(CodecName(static_cast<Codec>(9))) == "?");
  CHECK(detail::StoredInPlace(Codec::kRaw));
  CHECK_FALSE(detail::StoredInPlace(Codec::kZstd));
  CHECK_FALSE(detail::StoredInPlace(static_cast<Codec>(9)));
}

TEST_CASE("codec table: each codec round-trips and keeps what it chose") {
  const auto dict = TrainedDictionary();
  const Bytes src = Sample(3);
  detail::CodecContext ctx;
  struct Case {
    Codec writer;
    const detail::Dictionary* dict;
    Codec stored;
  } cases[] = {{Codec::kRaw, nullptr, Codec::kRaw},
               {Codec::kZstd, nullptr, Codec::kZstd},
               {Codec::kZstd, dict.get(), Codec::kZstdDict}};
  for (const Case& c : cases) {
    INFO(CodecName(c.writer) << (c.dict ? " with a dictionary" : ""));
    Bytes stored;
    auto used = detail::EncodeBlob(c.writer, ctx, src.data(), src.size(), c.dict, 3, 0.95, &stored);
    REQUIRE(used.ok());
    CHECK(*used == c.stored);
    if (detail::StoredInPlace(*used)) {
      CHECK(stored == src);
    } else {
      CHECK(stored.size() < src.size());
    }
    Bytes out(src.size(), 0xEE);
    REQUIRE(detail::DecodeBlob(*used, stored.data(), stored.size(), src.size(), out.data(), &ctx, c.dict).ok());
    CHECK(out == src);
  }
}

TEST_CASE("codec table: a blob that does not shrink enough is stored raw") {
  Bytes noise(2048);
  uint32_t x = 12345;
  for (auto& b : noise) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  detail::CodecContext ctx;
  Bytes stored;
  auto used = detail::EncodeBlob(Codec::kZstd, ctx, noise.data(), noise.size(), nullptr, 3, 0.95, &stored);
  REQUIRE(used.ok());
  CHECK(*used == Codec::kRaw);
  CHECK(stored == noise);
}

TEST_CASE("codec table: decoding refuses unknown codecs, missing dictionaries and wrong sizes") {
  const Bytes src = Sample(1);
  detail::CodecContext ctx;
  Bytes frame;
  REQUIRE(detail::EncodeBlob(Codec::kZstd, ctx, src.data(), src.size(), nullptr, 3, 0.95, &frame).ok());
  Bytes out(src.size());
  auto unknown =
      detail::DecodeBlob(static_cast<Codec>(7), frame.data(), frame.size(), src.size(), out.data(), &ctx, nullptr);
  CHECK(unknown.code() == StatusCode::kCorruption);
  CHECK(unknown.message().find("unknown codec 7") != std::string::npos);
  auto no_dict =
      detail::DecodeBlob(Codec::kZstdDict, frame.data(), frame.size(), src.size(), out.data(), &ctx, nullptr);
  CHECK(no_dict.code() == StatusCode::kCorruption);
  CHECK(no_dict.message().find("has none") != std::string::npos);
  auto raw_size = detail::DecodeBlob(Codec::kRaw, src.data(), src.size() - 1, src.size(), out.data(), &ctx, nullptr);
  CHECK(raw_size.code() == StatusCode::kCorruption);
  CHECK(raw_size.message().find("expected 4096") != std::string::npos);
  auto unknown_writer = detail::EncodeBlob(static_cast<Codec>(7), ctx, src.data(), src.size(), nullptr, 3, 0.95, &out);
  CHECK(unknown_writer.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("codec table: a dictionary with raw literals makes frames that keep them raw, and decode the same") {
  std::vector<Bytes> pictures, noise;
  for (uint64_t i = 0; i < 200; ++i) {
    pictures.push_back(testing::ImageLike(i));
    Bytes n = testing::Pattern(784, i, /*smooth=*/false);
    for (auto& b : n) b &= 0x0f;  // 4 bits of noise a byte: Huffman coding halves them
    noise.push_back(n);
  }
  auto bytes = detail::TrainDictionary(pictures, 4096);
  REQUIRE(bytes.ok());
  CHECK(*detail::RawLiteralsPay(pictures, *bytes, 9));
  CHECK_FALSE(*detail::RawLiteralsPay(noise, *bytes, 9));
  CHECK_FALSE(*detail::RawLiteralsPay({}, *bytes, 9));
  const auto huffman = detail::Dictionary::Create(*bytes, 9, false), raw = detail::Dictionary::Create(*bytes, 9, true);
  REQUIRE((huffman.ok() && raw.ok()));
  detail::CodecContext ctx;
  for (const bool picture : {true, false}) {  // min_ratio 2: every frame is kept
    const Bytes& src = picture ? pictures[7] : noise[7];
    Bytes coded, plain;
    REQUIRE(*detail::EncodeBlob(Codec::kZstd, ctx, src.data(), src.size(), huffman->get(), 9, 2.0, &coded) ==
            Codec::kZstdDict);
    REQUIRE(*detail::EncodeBlob(Codec::kZstd, ctx, src.data(), src.size(), raw->get(), 9, 2.0, &plain) ==
            Codec::kZstdDict);
    CHECK(testing::ZstdLiteralsType(coded) >= 2);  // Huffman-coded, with its own table or the dictionary's
    // Raw literals: in a compressed block (the picture), or the noise's block stored as it is.
    CHECK(testing::ZstdLiteralsType(plain) == (picture ? 0 : -1));
    // Either decodes with the same dictionary, whichever way the reader loaded it.
    for (const Bytes* frame : {&coded, &plain}) {
      Bytes out(src.size(), 0xEE);
      REQUIRE(detail::DecodeBlob(Codec::kZstdDict, frame->data(), frame->size(), src.size(), out.data(), &ctx,
                                 huffman->get())
                  .ok());
      CHECK(out == src);
    }
  }
}
