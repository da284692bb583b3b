// shardify: converts an image dataset (PNG, JPEG, NIfTI, idx) into a shard dataset.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "convert/convert.h"
#include "convert/progress.h"

namespace {

std::atomic<bool> g_cancel{false};

extern "C" void OnSignal(int) {
  if (g_cancel.exchange(true)) _exit(130);  // a second Ctrl-C ends at once
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') { out.push_back(cur); cur.clear(); } else cur += c;
  }
  if (!cur.empty() || !out.empty()) out.push_back(cur);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardify::convert;
  CLI::App app{
      "shardify: convert an image dataset once into zstd-compressed, checksummed shards.\n\n"
      "SRC is a directory in one of these layouts (detected, or set with --layout):\n"
      "  folder  SRC/<class>/<image>: labels from the sorted class folder names\n"
      "  csv     SRC is a .csv with columns image[,label,mask,split,...]; paths relative to it\n"
      "  pairs   SRC/images/ and SRC/masks/ with matching file names\n"
      "  rle     SRC/train.csv (id,class,segmentation) and SRC/train/caseN/caseN_dayM/scans/*.png\n"
      "  nnunet  SRC/dataset.json, imagesTr/<case>_XXXX.nii.gz, labelsTr/<case>.nii.gz, imagesTs/\n"
      "  nifti   a folder of .nii / .nii.gz volumes\n"
      "  idx     MNIST-style *-images-idx3-ubyte[.gz] with *-labels-idx1-ubyte[.gz]\n"
      "Images may be PNG (1 to 16 bit, gray, gray+alpha, RGB, RGBA, palette), JPEG, NIfTI-1/2.\n"
      "Pixels keep their dtype; volumes keep spacing, origin, direction and the NIfTI header.\n"
      "The output is byte-identical for any --threads. Ctrl-C stops cleanly (nothing is left\n"
      "that looks like a dataset). One run at a time may write a DST (a second one fails as busy).\n"
      "Exit codes: 0 done, 1 failed, 2 bad usage, 130 interrupted."};
  std::string src, dst, layout = "auto", split, on_error = "fail", shard_size = "256M", classes;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string level = "auto";
  uint64_t seed = 0;
  bool dict = false, no_dict = false, overwrite = false, dry_run = false, no_fsync = false, quiet = false;
  app.add_option("SRC", src, "Source directory, or a .csv file for the csv layout")->required();
  app.add_option("-o,--output", dst, "Destination dataset directory (created if missing)")->required();
  app.add_option("--layout", layout, "auto, folder, csv, pairs, rle, nnunet, nifti or idx")->capture_default_str();
  app.add_option("--threads", threads, "Decode/compress threads (default: all cores)")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--level", level, "zstd compression level 1..19, or auto: 9 when samples are at most 64 KiB\n"
                                   "(small images gain from it at no cost in speed), else 3")->capture_default_str();
  app.add_option("--shard-size", shard_size, "Target shard size: bytes, or with K/M/G suffix")->capture_default_str();
  app.add_flag("--dict", dict, "Train a zstd dictionary per image/mask field (default: when there are at least\n"
                               "1,000 samples of at most 64 KiB, where it saves 2-3%)");
  app.add_flag("--no-dict", no_dict, "Never train a dictionary");
  app.add_option("--split", split, "Random stratified splits, e.g. train=0.8,val=0.1,test=0.1 (default: none;\n"
                                   "a layout's own split, like idx train/t10k, imagesTs or a csv split column, wins)");
  app.add_option("--seed", seed, "Seed of the --split assignment and of --fg-locations")->capture_default_str();
  app.add_option("--on-error", on_error, "fail: stop at the first bad input; skip: leave it out and list it in\n"
                                         "DST/skipped.tsv")->capture_default_str()->check(CLI::IsMember({"fail", "skip"}));
  app.add_option("--classes", classes, "Comma-separated class names for integer labels (idx, csv)");
  app.add_flag("--overwrite", overwrite, "Replace a dataset already at DST (otherwise refused). The new one is written\n"
                                         "beside it and switched in when complete; until then DST stays readable");
  app.add_flag("--dry-run", dry_run, "Scan and check every input, print the summary, write nothing");
  app.add_flag("--no-fsync", no_fsync, "Skip fsync of shards and manifest (faster, less crash safe)");
  std::string patch_size;
  uint64_t fg_locations = 10000;
  app.add_option("--patch-size", patch_size,
                 "Training patch size: DxHxW for volumes, HxW for 2D (e.g. 128x128x128). Stores\n"
                 "image and mask in chunks (format version 2), so a patch decodes only the chunks it\n"
                 "touches: about a quarter of the patch per axis, at most 1.5x the patch and ~6 MiB,\n"
                 "sized from the largest case. Masks also get mask.fg_locations (see --fg-locations)");
  app.add_option("--fg-locations", fg_locations,
                 "With --patch-size: foreground voxels kept per class and case in mask.fg_locations,\n"
                 "drawn uniformly and seeded by --seed (0: none)")
      ->capture_default_str();
  bool no_shuffle = false;
  app.add_flag("--no-shuffle", no_shuffle,
               "Store 16/32/64-bit images and masks as they are. By default their bytes are shuffled\n"
               "(byte 0 of every element, then byte 1, ...; format version 3), which zstd compresses\n"
               "about 10-20% smaller on 16-bit and float volumes");
  std::string max_sample_memory = "2G", max_memory;
  app.add_option("--max-sample-memory", max_sample_memory,
                 "Largest sample (image channels + mask) as decoded, in bytes or with K/M/G/T; a larger\n"
                 "one is an error for that input (skippable), found from its header before decoding")
      ->capture_default_str();
  app.add_option("--max-memory", max_memory,
                 "Memory for samples being converted at once (each takes about 3x its decoded size);\n"
                 "fewer run in parallel to stay under it (default: half the physical memory)");
  app.add_flag("-q,--quiet", quiet, "No progress output");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; every usage error is 2, as documented
  }

  ConvertOptions o;
  o.source = src;
  o.dest = dst;
  auto parsed_layout = ParseLayout(layout);
  if (!parsed_layout) { std::fprintf(stderr, "shardify: unknown --layout '%s'\n", layout.c_str()); return 2; }
  o.layout = *parsed_layout;
  o.threads = threads;
  if (level == "auto") {
    o.zstd_level = 0;
  } else {
    char* end = nullptr;
    const long l = std::strtol(level.c_str(), &end, 10);
    if (end == level.c_str() || *end != '\0' || l < 1 || l > 19) {
      std::fprintf(stderr, "shardify: --level must be auto or 1..19, got '%s'\n", level.c_str());
      return 2;
    }
    o.zstd_level = static_cast<int>(l);
  }
  auto bytes = ParseByteSize(shard_size);
  if (!bytes.ok()) { std::fprintf(stderr, "shardify: --shard-size: %s\n", bytes.status().message().c_str()); return 2; }
  o.shard_bytes = *bytes;
  for (auto [flag, text, out] : {std::make_tuple("--max-sample-memory", &max_sample_memory, &o.max_sample_bytes),
                                 std::make_tuple("--max-memory", &max_memory, &o.max_memory)}) {
    if (text->empty()) continue;
    auto size = ParseByteSize(*text);
    if (!size.ok()) { std::fprintf(stderr, "shardify: %s: %s\n", flag, size.status().message().c_str()); return 2; }
    *out = *size;
  }
  if (!split.empty()) {
    auto s = ParseSplitSpec(split);
    if (!s.ok()) { std::fprintf(stderr, "shardify: %s\n", s.status().message().c_str()); return 2; }
    o.split = *s;
  }
  o.seed = seed;
  o.shuffle = !no_shuffle;
  if (app.count("--patch-size") > 0) {
    auto p = ParsePatchSize(patch_size);
    if (!p.ok()) { std::fprintf(stderr, "shardify: %s\n", p.status().message().c_str()); return 2; }
    o.patch_size = *p;
  } else if (app.count("--fg-locations") > 0) {
    std::fprintf(stderr, "shardify: --fg-locations needs --patch-size\n");
    return 2;
  }
  if (fg_locations > 100000000) {
    std::fprintf(stderr, "shardify: --fg-locations must be 0..100000000, got %llu\n", static_cast<unsigned long long>(fg_locations));
    return 2;
  }
  o.fg_locations = fg_locations;
  if (dict && no_dict) { std::fprintf(stderr, "shardify: --dict and --no-dict exclude each other\n"); return 2; }
  o.dict = dict ? 1 : no_dict ? 0 : -1;
  o.skip_errors = on_error == "skip";
  o.overwrite = overwrite;
  o.dry_run = dry_run;
  o.fsync = !no_fsync;
  o.class_names = SplitList(classes);
  o.cancel = &g_cancel;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  ConsoleProgress progress(stderr, isatty(STDERR_FILENO) != 0);
  auto result = Convert(o, quiet ? nullptr : &progress);
  progress.Done();
  if (!result.ok()) {
    std::fprintf(stderr, "shardify: %s\n", result.status().ToString().c_str());
    return result.status().code() == shardify::StatusCode::kCancelled ? 130 : 1;
  }
  std::fputs(FormatSummary(*result).c_str(), stdout);
  return 0;
}
