#include "format/strings.h"

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
