#include "convert/programs/cli.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <tuple>

#include "base/cli.h"
#include "base/parallel.h"
#include "base/strings.h"
#include "convert/pipeline/parts.h"

namespace shardify::convert {
namespace {

const std::string kDescription =
    "shardify: convert an image dataset once into compressed (or raw), checksummed shards.\n\n"
    "SRC is a directory in one of these layouts (detected, or set with --layout):\n" +
    LayoutHelp() +
    "Images may be PNG (1 to 16 bit, gray, gray+alpha, RGB, RGBA, palette), JPEG, NIfTI-1/2.\n"
    "Pixels keep their dtype; volumes keep spacing, origin, direction and the NIfTI header.\n"
    "The output is byte-identical for any --threads. Ctrl-C stops cleanly (nothing is left\n"
    "that looks like a dataset). One run at a time may write a DST (a second one fails as busy).\n"
    "Large datasets convert in parts (--part K/N, on several machines), then\n"
    "`shardify merge DST` makes DST the dataset (shardify merge --help).\n"
    "Exit codes: 0 done, 1 failed, 2 bad usage, 130 interrupted.";

constexpr const char* kMergeDescription =
    "shardify merge DST: makes DST the dataset once every part of it is converted\n"
    "(shardify SRC -o DST --part K/N for K = 1..N). Checks that the parts are all there, once\n"
    "each, from the same source and options; moves their shards into DST (no re-encoding),\n"
    "combines splits, statistics and skipped.tsv, writes DST/manifest.sfm last and removes\n"
    "DST/parts. Interrupted, it can run again. DST may be s3://bucket/prefix: the parts are\n"
    "fetched into a staging folder in the cache directory, merged there and put back, the\n"
    "manifest last, then the parts' objects are deleted. Exit codes: 0 done, 1 failed, 2 bad usage.";

// The flags as typed, before they are checked and turned into ConvertOptions.
struct Flags {
  std::string src, dst, layout = "auto", split, on_error = "fail", shard_size = "256M", classes;
  int threads = static_cast<int>(CoreCount());
  std::string level = "auto", codec = "zstd";
  uint64_t seed = 0;
  bool dict = false, no_dict = false, overwrite = false, dry_run = false, no_fsync = false, quiet = false;
  std::string patch_size, group_by;
  uint64_t fg_locations = 10000;
  bool no_shuffle = false, nan_to_num = false, labels_from_masks = false;
  std::string max_sample_memory = "2G", max_memory;
  std::string part;
  std::string dtype, spacing, resample_image = "cubic", resample_mask = "linear", crop = "none", normalize = "none";
  std::string preprocess = "none";
  std::string plans, configuration = "3d_fullres";
  uint64_t intensity_samples = PreprocessOptions{}.intensity_samples;
};

// The preprocessing flags (preprocess.h).
void DefinePreprocess(CLI::App& app, Flags& f) {
  app.add_option("--preprocess", f.preprocess,
                 "nnunet: nnU-Net v2's default preprocessing (3d_fullres): --crop nonzero, --spacing auto,\n"
                 "cubic images, masks per label, each channel normalized by its name in dataset.json\n"
                 "(CT -> ct, noNorm -> none, else zscore; zscore without names). Flags given as well win")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "nnunet"}));
  app.add_option("--plans", f.plans,
                 "An nnU-Net v2 plans file (nnUNetPlans.json of nnUNetv2_plan_and_preprocess): preprocess as\n"
                 "its configuration does: crop to nonzero, its spacing (axes mapped back through\n"
                 "transpose_forward), normalization schemes, use_mask_for_norm, CT statistics, resampling\n"
                 "orders and patch size (as --patch-size). Flags that set any of these are refused with it");
  app.add_option("--configuration", f.configuration, "With --plans: the configuration to apply")->capture_default_str();
  app.add_option("--dtype", f.dtype,
                 "Store the image field in this dtype: u8, i8, u16, i16, u32, i32, i64, f16, f32 or f64.\n"
                 "Default: the smallest dtype that holds every input's values exactly (u8 + u16 -> u16,\n"
                 "i16 + u16 -> i32, u8 + f32 -> f32), f32 when normalized; each sample records its own");
  app.add_option("--spacing", f.spacing,
                 "Resample volumes to this spacing in mm, axes named as in image.spacing and NIfTI:\n"
                 "x=0.8,y=0.8,z=1.5; one value for all axes (1 or 1,1,1); or auto: nnU-Net's rule\n"
                 "(the median spacing; a finer one on the coarse axis of anisotropic data)");
  app.add_option("--resample-image", f.resample_image,
                 "With --spacing: images by cubic B-spline or linear interpolation")
      ->capture_default_str()
      ->check(CLI::IsMember({"cubic", "linear"}));
  app.add_option("--resample-mask", f.resample_mask,
                 "With --spacing: masks by nnU-Net's per-label linear interpolation, or nearest neighbour")
      ->capture_default_str()
      ->check(CLI::IsMember({"linear", "nearest"}));
  app.add_option("--crop", f.crop, "nonzero: crop each case to the box of its voxels nonzero in any channel")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "nonzero"}));
  app.add_option("--normalize", f.normalize,
                 "Per channel: zscore (per case), ct (clip to the 0.5/99.5 percentiles of the training\n"
                 "split's foreground, then z-score with its mean and std; needs masks), none; or one per\n"
                 "channel, e.g. ct,zscore. Stored as f32 (or --dtype f16 / f64)")
      ->capture_default_str();
  app.add_option("--intensity-samples", f.intensity_samples,
                 "Foreground values drawn over the training cases for the ct statistics and nnU-Net's\n"
                 "fingerprint (as nnU-Net draws them: the same number from each case). Fewer are faster;\n"
                 "the statistics then differ a little from nnU-Net's")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_flag("--nan-to-num", f.nan_to_num,
               "Make NaN and infinite image voxels 0 before preprocessing. Without it, a case that has\n"
               "any fails (naming the file and count) when it is normalized or resampled");
}

// --plans with the flags that set what the plans set: a usage error naming both.
Status CheckPlansFlags(const CLI::App& app, const Flags& f, PreprocessOptions& o) {
  if (app.count("--plans") == 0) {
    if (app.count("--configuration") > 0) return InvalidArgument("--configuration needs --plans");
    return Status::Ok();
  }
  if (f.plans.empty()) return InvalidArgument("--plans: empty (expected a plans file, e.g. nnUNetPlans.json)");
  const std::pair<const char*, const char*> set[] = {{"--spacing", "the target spacing"},
                                                     {"--normalize", "each channel's normalization"},
                                                     {"--resample-image", "the image resampling order"},
                                                     {"--resample-mask", "the mask resampling order"},
                                                     {"--patch-size", "the patch size"},
                                                     {"--preprocess", "nnU-Net's preprocessing"},
                                                     {"--crop", "the crop to the nonzero box"}};
  for (const auto& [flag, what] : set) {
    const std::string name = flag;
    if (app.count(name) == 0 || (name == "--preprocess" && f.preprocess == "none") ||
        (name == "--crop" && f.crop == "nonzero")) {
      continue;
    }
    return InvalidArgument(name + " contradicts --plans " + f.plans + ", which sets " + what + "; give one of them");
  }
  o.plans_file = f.plans;
  o.plans_configuration = f.configuration;
  return Status::Ok();
}

// Checks the preprocessing flags and fills `o`.
Status ToPreprocessOptions(const CLI::App& app, const Flags& f, PreprocessOptions& o) {
  RETURN_IF_ERROR(CheckPlansFlags(app, f, o));
  if (!f.spacing.empty()) {
    RETURN_IF_ERROR(ParseSpacing(f.spacing, &o));
  } else if ((app.count("--resample-image") > 0 || app.count("--resample-mask") > 0) && f.preprocess != "nnunet") {
    return InvalidArgument("--resample-image and --resample-mask need --spacing (or --preprocess nnunet)");
  }
  o.image_interp = f.resample_image == "linear" ? ImageInterp::kLinear : ImageInterp::kCubic;
  o.mask_interp = f.resample_mask == "nearest" ? MaskInterp::kNearest : MaskInterp::kLinear;
  o.crop_nonzero = f.crop == "nonzero";
  o.nan_to_num = f.nan_to_num;
  o.intensity_samples = f.intensity_samples;
  ASSIGN_OR_RETURN(o.normalize, ParseNormalize(f.normalize));
  PresetGiven given;
  given.crop = app.count("--crop") > 0;
  given.spacing = app.count("--spacing") > 0;
  given.normalize = app.count("--normalize") > 0;
  RETURN_IF_ERROR(ApplyPreset(f.preprocess, given, &o));
  if (!f.dtype.empty()) {
    o.dtype = ParseDType(f.dtype);
    if (!o.dtype)
      return InvalidArgument("--dtype '" + f.dtype + "' is not one of u8, i8, u16, i16, u32, i32, i64, f16, f32, f64");
    const bool is_float = *o.dtype == DType::kF16 || *o.dtype == DType::kF32 || *o.dtype == DType::kF64;
    if (o.normalizes() && !is_float) {
      return InvalidArgument("--normalize stores floats: --dtype must be f16, f32 or f64, not " + f.dtype);
    }
  }
  return Status::Ok();
}

void Define(CLI::App& app, Flags& f) {
  app.add_option("SRC", f.src, "Source directory, or a .csv file for the csv layout")->required();
  app.add_option("-o,--output", f.dst,
                 "Destination dataset directory (created if missing), or s3://bucket/prefix (written to a local\n"
                 "staging folder in the cache directory, then uploaded, the manifest last; see docs/remote.md)")
      ->required();
  app.add_option("--layout", f.layout, LayoutNames())->capture_default_str();
  // No default shown: it is this machine's core count, and docs/reference/ is made from --help.
  app.add_option("--threads", f.threads, "Decode/compress threads (default: all cores)")->check(CLI::Range(1, 1024));
  app.add_option("--codec", f.codec,
                 "How images and masks are stored: zstd (compressed), raw (larger; read by a copy,\n"
                 "with no decompression), or auto: raw when they decode to at most 2 GiB in all\n"
                 "(a dataset that stays in the page cache), else zstd")
      ->capture_default_str()
      ->check(CLI::IsMember({"zstd", "raw", "auto"}));
  app.add_option("--level", f.level,
                 "zstd compression level 1..19, or auto: 9 when samples are at most 64 KiB\n"
                 "(small images gain from it at no cost in speed), else 3 with masks at 9")
      ->capture_default_str();
  app.add_option("--shard-size", f.shard_size, "Target shard size: bytes, or with K/M/G suffix")->capture_default_str();
  app.add_flag("--dict", f.dict,
               "Train a zstd dictionary per image/mask field (default: when there are at least\n"
               "1,000 samples of at most 64 KiB); its frames keep their literals raw where that\n"
               "costs at most 8% more bytes, and then read about twice as fast");
  app.add_flag("--no-dict", f.no_dict, "Never train a dictionary");
  app.add_option("--split", f.split,
                 "Random stratified splits, e.g. train=0.8,val=0.1,test=0.1 (default: none;\n"
                 "a layout's own split, like idx train/t10k, imagesTs or a csv split column, wins)");
  app.add_option("--group-by", f.group_by,
                 "With --split: keep every sample of a group in one split (stratified by label where\n"
                 "labels allow). case (rle: caseN; nnunet: the case), day (rle: caseN_dayM), or a regex\n"
                 "over the path field whose first group (else whole match) names the group");
  app.add_option("--seed", f.seed, "Seed of the --split assignment and of --fg-locations")->capture_default_str();
  app.add_option("--on-error", f.on_error,
                 "fail: stop at the first bad input; skip: leave it out and list it in\n"
                 "DST/skipped.tsv")
      ->capture_default_str()
      ->check(CLI::IsMember({"fail", "skip"}));
  app.add_option("--classes", f.classes, "Comma-separated class names for integer labels (idx, csv)");
  app.add_flag("--overwrite", f.overwrite,
               "Replace a dataset already at DST (otherwise refused). The new one is written\n"
               "beside it and switched in when complete; until then DST stays readable");
  app.add_flag("--dry-run", f.dry_run, "Scan and check every input, print the summary, write nothing");
  app.add_flag("--no-fsync", f.no_fsync, "Skip fsync of shards and manifest (faster, less crash safe)");
  app.add_option("--patch-size", f.patch_size,
                 "Training patch size: DxHxW for volumes, HxW for 2D (e.g. 128x128x128). Stores\n"
                 "image and mask in chunks (format version 2), so a patch decodes only the chunks it\n"
                 "touches: about a quarter of the patch per axis, at most 1.5x the patch and ~6 MiB,\n"
                 "sized from the largest case. Masks also get mask.fg_locations (see --fg-locations)");
  app.add_option("--fg-locations", f.fg_locations,
                 "With --patch-size: foreground voxels kept per class and case in mask.fg_locations,\n"
                 "drawn uniformly and seeded by --seed (0: none)")
      ->capture_default_str();
  app.add_flag("--no-shuffle", f.no_shuffle,
               "Store 16/32/64-bit images and masks as they are. By default their bytes are shuffled\n"
               "(byte 0 of every element, then byte 1, ...; format version 3), which zstd compresses\n"
               "about 10-20% smaller on 16-bit and float volumes, and mask.fg_locations is stored as\n"
               "differences of its sorted rows (format version 4), about half as large");
  app.add_option("--max-sample-memory", f.max_sample_memory,
                 "Largest sample (image channels + mask) as decoded, in bytes or with K/M/G/T; a larger\n"
                 "one is an error for that input (skippable), found from its header before decoding")
      ->capture_default_str();
  app.add_option("--max-memory", f.max_memory,
                 "Memory for samples being converted at once (each takes about 3x its decoded size);\n"
                 "fewer run in parallel to stay under it (default: half the physical memory)");
  app.add_option("--part", f.part,
                 "Convert only part K of N (K/N, 1 <= K <= N): the K-th contiguous slice of the sample\n"
                 "order, into DST/parts/; once all N are done, `shardify merge DST` makes DST the\n"
                 "dataset. auto: K/N from RANK/WORLD_SIZE, a Slurm array or SLURM_PROCID/SLURM_NTASKS.\n"
                 "A part already complete is not converted again (--overwrite does)");
  app.add_flag("--labels-from-masks", f.labels_from_masks,
               "nnunet layout: add mask values that dataset.json's labels do not declare as labels\n"
               "label_<value> (without it they fail the run before anything is written)");
  DefinePreprocess(app, f);
  app.add_flag("-q,--quiet", f.quiet, "No progress output");
}

Result<int> ParseLevel(const std::string& level) {
  if (level == "auto") return 0;
  char* end = nullptr;
  const long l = std::strtol(level.c_str(), &end, 10);
  if (end == level.c_str() || *end != '\0' || l < 1 || l > 19) {
    return InvalidArgument("--level must be auto or 1..19, got '" + level + "'");
  }
  return static_cast<int>(l);
}

// Checks the typed flags and fills `o`. `app` tells which flags were given.
Status ToOptions(const CLI::App& app, const Flags& f, ConvertOptions& o) {
  o.source = f.src;
  o.dest = f.dst;
  const auto layout = ParseLayout(f.layout);
  if (!layout) return InvalidArgument("unknown --layout '" + f.layout + "'");
  o.layout = *layout;
  o.threads = f.threads;
  o.codec = f.codec == "raw" ? CodecChoice::kRaw : f.codec == "auto" ? CodecChoice::kAuto : CodecChoice::kZstd;
  ASSIGN_OR_RETURN(o.level, ParseLevel(f.level));
  if (o.codec == CodecChoice::kRaw && (app.count("--level") > 0 || f.dict)) {
    return InvalidArgument(std::string(app.count("--level") > 0 ? "--level" : "--dict") +
                           " sets zstd compression, and --codec raw stores arrays uncompressed");
  }
  Result<uint64_t> bytes = ParseByteSize(f.shard_size);
  if (!bytes.ok()) return bytes.status().WithContext("--shard-size");
  o.shard_bytes = *bytes;
  for (auto [flag, text, out] : {std::make_tuple("--max-sample-memory", &f.max_sample_memory, &o.max_sample_bytes),
                                 std::make_tuple("--max-memory", &f.max_memory, &o.max_memory)}) {
    if (text->empty()) continue;
    Result<uint64_t> size = ParseByteSize(*text);
    if (!size.ok()) return size.status().WithContext(flag);
    *out = *size;
  }
  if (!f.split.empty()) {
    ASSIGN_OR_RETURN(o.split, ParseSplitSpec(f.split));
  }
  if (app.count("--group-by") > 0 && (f.group_by.empty() || f.split.empty())) {
    return InvalidArgument("--group-by needs a group (case, day or a regex) and --split");
  }
  o.group_by = f.group_by;
  o.seed = f.seed;
  o.shuffle = !f.no_shuffle;
  if (app.count("--patch-size") > 0) {
    ASSIGN_OR_RETURN(o.patch_size, ParsePatchSize(f.patch_size));
  } else if (app.count("--fg-locations") > 0) {
    return InvalidArgument("--fg-locations needs --patch-size");
  }
  if (f.fg_locations > 100000000) {
    return InvalidArgument("--fg-locations must be 0..100000000, got " + std::to_string(f.fg_locations));
  }
  o.fg_locations = f.fg_locations;
  if (f.dict && f.no_dict) return InvalidArgument("--dict and --no-dict exclude each other");
  o.dict = f.dict ? 1 : f.no_dict ? 0 : -1;
  o.skip_errors = f.on_error == "skip";
  o.overwrite = f.overwrite;
  o.dry_run = f.dry_run;
  o.fsync = !f.no_fsync;
  o.class_names = SplitComma(f.classes);
  o.labels_from_masks = f.labels_from_masks;
  if (!f.part.empty()) {
    ASSIGN_OR_RETURN(const auto part,
                     ParsePart(f.part, [](const char* name) -> const char* { return std::getenv(name); }));
    o.part = part.first;
    o.parts = part.second;
  }
  return ToPreprocessOptions(app, f, o.preprocess);
}

}  // namespace

Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CLI::App app{kDescription};
  Flags flags;
  Define(app, flags);
  cli::CheckIntegerOptions(app);
  std::vector<const char*> argv{"shardify"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  CommandLine c;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    c.help = true;
    return c;
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  RETURN_IF_ERROR(ToOptions(app, flags, c.options));
  c.quiet = flags.quiet;
  return c;
}

std::string CommandLineHelp() {
  CLI::App app{kDescription};
  app.name("shardify");
  Flags flags;
  Define(app, flags);
  return app.help();
}

Result<MergeCommandLine> ParseMergeCommandLine(const std::vector<std::string>& args) {
  CLI::App app{kMergeDescription};
  MergeCommandLine c;
  bool no_fsync = false;
  app.add_option("DST", c.dest, "Dataset directory, or s3://bucket/prefix, whose parts to merge")->required();
  app.add_flag("--no-fsync", no_fsync, "Skip fsync of shards and manifest (faster, less crash safe)");
  std::vector<const char*> argv{"shardify merge"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    c.help = true;
    c.help_text = app.help();
    return c;
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  c.fsync = !no_fsync;
  return c;
}

std::vector<FlagInfo> CommandLineFlags() {
  CLI::App app{kDescription};
  Flags flags;
  Define(app, flags);
  std::vector<FlagInfo> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty()) continue;  // SRC and --help's short form
    const std::string name = opt->get_lnames().front();
    if (name == "help") continue;
    out.push_back(FlagInfo{name, opt->get_items_expected_max() != 0, opt->get_description()});
  }
  return out;
}

}  // namespace shardify::convert
