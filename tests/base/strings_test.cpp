#include "base/strings.h"

#include <catch2/catch.hpp>

using namespace shardify;

TEST_CASE("strings: EndsWith matches byte for byte, EndsWithNoCase folds the name's case") {
  CHECK(EndsWith("scan.nii.gz", ".nii.gz"));
  CHECK(EndsWith(".sfs", ".sfs"));
  CHECK(EndsWith("abc", ""));
  CHECK_FALSE(EndsWith("gz", ".gz"));
  CHECK_FALSE(EndsWith("scan.NII.GZ", ".nii.gz"));
  CHECK(EndsWithNoCase("scan.NII.GZ", ".nii.gz"));
  CHECK(EndsWithNoCase("a.Png", ".png"));
  CHECK_FALSE(EndsWithNoCase("a.png.txt", ".png"));
  CHECK_FALSE(EndsWithNoCase("png", ".png"));
}

TEST_CASE("strings: IsUtf8 accepts well-formed UTF-8 only, EscapeNonUtf8 spells out the other bytes") {
  CHECK(IsUtf8(""));
  CHECK(IsUtf8("cat/1.png"));
  CHECK(IsUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x90\x88"));  // é, €, a cat emoji
  for (const char* bad : {"caf\xE9", "\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF",
                          "a\x80"
                          "b"}) {
    INFO(bad);
    CHECK_FALSE(IsUtf8(bad));
  }
  CHECK(EscapeNonUtf8("caf\xE9/\xC3\xA9.png") == "caf\\xE9/\xC3\xA9.png");
  CHECK(EscapeNonUtf8("\xC3") == "\\xC3");
}

TEST_CASE("strings: SplitComma keeps empty items, and an empty text has none") {
  using V = std::vector<std::string>;
  CHECK(SplitComma("").empty());
  CHECK(SplitComma("ct") == V{"ct"});
  CHECK(SplitComma("ct,zscore") == V{"ct", "zscore"});
  CHECK(SplitComma("a,,b") == V{"a", "", "b"});
  CHECK(SplitComma("a,") == V{"a", ""});
  CHECK(SplitComma(",") == V{"", ""});
}
