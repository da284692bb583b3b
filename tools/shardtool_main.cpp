// shardtool: inspect, verify, export, plot and benchmark shard datasets.
// Thin: parse flags, call one library function, print its error and exit with its code.
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "base/cli.h"
#include "tools/bench.h"
#include "tools/common.h"
#include "tools/export.h"
#include "tools/grid.h"
#include "tools/info.h"
#include "tools/show.h"
#include "tools/stats.h"
#include "tools/verify.h"
#include "tools/view.h"

namespace {

namespace t = shardify::tools;
using shardify::Status;

constexpr char kExitCodes[] =
    "\nExit codes:\n"
    "  0  success (verify: no problems found)\n"
    "  1  a problem was found in the data (verify: one line per problem\n"
    "     'shard <file> sample <i>: <what>'; any command: a checksum or structure error)\n"
    "  2  usage error, missing dataset or file, or an I/O error\n";

// Flags of every subcommand, filled by CLI11.
struct Args {
  std::string dir, output, io = "mmap";
  bool json = false, no_preview = false;
  uint64_t index = 0;
  t::InfoOptions info;
  t::LsOptions ls;
  t::ShowOptions show;
  t::ExportOptions exp;
  t::VerifyOptions verify;
  t::StatsOptions stats;
  t::GridOptions grid;
  t::BenchOptions bench;
  t::ViewOptions view;
};

using Command = std::pair<CLI::App*, std::function<Status()>>;

CLI::App* Add(CLI::App& app, const char* name, const char* what, Args& a) {
  CLI::App* c = app.add_subcommand(name, what);
  c->add_option("DATASET", a.dir, "dataset directory (holds manifest.sfm), or its s3:// or http(s):// location")
      ->required();
  c->add_flag("--json", a.json, "machine-readable JSON on stdout");
  c->add_option("--io", a.io,
                "how shards are read: mmap (a memory mapping) or pread (no page faults: NFS, FUSE);\n"
                "same bytes and checks")
      ->capture_default_str()
      ->check(CLI::IsMember({"mmap", "pread"}));
  shardify::cli::AddCacheOptions(*c);
  c->footer(kExitCodes);
  return c;
}

shardify::IoMode Io(const Args& a) { return *shardify::ParseIoMode(a.io); }  // checked by CLI11

void AddInspect(CLI::App& app, Args& a, std::vector<Command>& cmds) {
  auto* info =
      Add(app, "info", "samples per split, fields, classes with counts, shards, stored vs raw bytes, provenance", a);
  info->add_flag("--shards", a.info.list_shards, "list every shard file");
  cmds.emplace_back(info, [&a] {
    a.info.json = a.json;
    a.info.io = Io(a);
    return t::RunInfo(a.dir, a.info, std::cout);
  });

  auto* ls = Add(app, "ls", "one row per sample: index, split, label, shape, stored bytes, shard", a);
  ls->add_option("--split", a.ls.split, "only this split");
  ls->add_option("--offset", a.ls.offset, "skip this many rows of the split");
  ls->add_option("--limit", a.ls.limit, "at most this many rows (0 = all)");
  cmds.emplace_back(ls, [&a] {
    a.ls.json = a.json;
    a.ls.io = Io(a);
    return t::RunLs(a.dir, a.ls, std::cout);
  });

  auto* show = Add(app, "show", "one sample: every field, geometry, scalars, a text preview of the image", a);
  show->add_option("N", a.index, "sample index (global, 0-based)")->required();
  show->add_option("--cols", a.show.preview_cols, "preview width in characters");
  show->add_flag("--no-preview", a.no_preview, "leave out the text preview");
  cmds.emplace_back(show, [&a] {
    a.show.json = a.json;
    a.show.io = Io(a);
    a.show.preview = !a.no_preview;
    return t::RunShow(a.dir, a.index, a.show, std::cout);
  });

  auto* stats = Add(app, "stats", "per field and channel min, max, mean, std; label histogram (streams)", a);
  stats->add_option("--split", a.stats.split, "only this split");
  stats->add_option("--limit", a.stats.limit, "only the first N samples (0 = all)");
  stats->add_option("--threads", a.stats.threads, "decode threads (0 = all cores)");
  cmds.emplace_back(stats, [&a] {
    a.stats.json = a.json;
    a.stats.io = Io(a);
    return t::RunStats(a.dir, a.stats, std::cout);
  });
}

void AddOutputs(CLI::App& app, Args& a, std::vector<Command>& cmds) {
  auto* exp = Add(app, "export",
                  "write one sample as PNG (2D, u8/u16) or NIfTI (.nii, .nii.gz) in its source "
                  "dtype; volumes get their source header and geometry back",
                  a);
  exp->add_option("N", a.index, "sample index (global, 0-based)")->required();
  exp->add_option("-o,--output", a.output, "output file: .png, .nii or .nii.gz")->required();
  exp->add_option("--field", a.exp.field, "ndarray field to export (default: the image field)");
  exp->add_flag("--source-grid", a.exp.source_grid,
                "map an array that shardify cropped or resampled back onto its source grid (the file "
                "overlays the source image in a viewer)");
  cmds.emplace_back(exp, [&a] {
    a.exp.json = a.json;
    a.exp.io = Io(a);
    return t::RunExport(a.dir, a.index, a.output, a.exp, std::cout);
  });

  auto* grid = Add(app, "grid",
                   "contact sheet PNG of samples with class names; masks drawn over their "
                   "images; the middle slice of volumes",
                   a);
  grid->add_option("-o,--output", a.output, "output PNG file")->required();
  grid->add_option("--count", a.grid.count, "samples to draw (default 16)");
  grid->add_option("--split", a.grid.split, "draw from this split");
  grid->add_option("--seed", a.grid.seed, "which samples: the same seed draws the same ones");
  grid->add_option("--field", a.grid.field, "ndarray field to draw (default: the image field)");
  grid->add_option("--tile", a.grid.tile, "tile size in pixels (default 96)");
  grid->add_option("--columns", a.grid.columns, "tiles per row (default: a square)");
  cmds.emplace_back(grid, [&a] {
    a.grid.json = a.json;
    a.grid.io = Io(a);
    return t::RunGrid(a.dir, a.output, a.grid, std::cout);
  });
}

void AddChecks(CLI::App& app, Args& a, std::vector<Command>& cmds) {
  auto* verify = Add(app, "verify", "check every checksum and structure, one line per problem", a);
  verify->add_flag("--quick", a.verify.quick, "structure only: file sizes, shard ends, footers, indices");
  verify->add_option("--threads", a.verify.threads, "shards checked at once (0 = all cores)");
  cmds.emplace_back(verify, [&a] {
    a.verify.json = a.json;
    a.verify.io = Io(a);
    return t::RunVerify(a.dir, a.verify, std::cout);
  });

  auto* bench = Add(app, "bench",
                    "reading throughput (samples/s, MB/s) through the streaming Loader, "
                    "shuffled, checksums on; with --patch, random patches against whole volumes",
                    a);
  bench->add_option("--split", a.bench.split, "split to read (default: the first)");
  bench->add_option("--batch", a.bench.batch, "batch size (default 64)");
  bench->add_option("--threads", a.bench.threads, "decode threads (0 = all cores)");
  bench->add_option("--epochs", a.bench.epochs, "passes over the split (default 1)");
  bench->add_option("--seed", a.bench.seed, "shuffle seed (with --patch: also the patch positions)");
  bench->add_flag("--direct", a.bench.direct, "decode with Dataset on plain threads, without the Loader");
  bench->add_option("--patch", a.bench.patch,
                    "DxHxW: time random patches of this size (PatchSampler: field image, mask if any,\n"
                    "33% foreground) against decoding whole images, with the ratio");
  bench->add_option("--patches", a.bench.patches, "with --patch: patches to draw (default 8 per sample, at least 32)");
  cmds.emplace_back(bench, [&a] {
    a.bench.json = a.json;
    a.bench.io = Io(a);
    return t::RunBench(a.dir, a.bench, std::cout);
  });
}

void AddView(CLI::App& app, Args& a, std::vector<Command>& cmds) {
  auto* view = app.add_subcommand("view",
                                  "a local, read-only web page of the dataset: overview, samples, slices, masks, "
                                  "augmentations (runs python3 -m shardify.view; docs/viewing.md)");
  view->add_option("DATASET", a.dir, "dataset directory (holds manifest.sfm), or its s3:// or http(s):// location")
      ->required();
  view->add_option("--port", a.view.port, "port to listen on (0: any free one; the URL is printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  view->add_option("--bind", a.view.bind,
                   "address to listen on (127.0.0.1: this machine alone; another lets the network read the dataset)")
      ->capture_default_str();
  view->add_flag("--verbose", a.view.verbose, "log every request on stderr");
  shardify::cli::AddCacheOptions(*view);
  view->footer(kExitCodes);
  cmds.emplace_back(view, [&a] { return t::RunView(a.dir, a.view); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "shardtool: inspect, verify, export, plot and benchmark shardify datasets.\n"
      "DATASET is a dataset directory, or its s3://bucket/prefix or http(s):// location (read through a\n"
      "local cache; see --cache-dir). Run 'shardtool <command> --help' for the options of a command."};
  app.name("shardtool");  // not argv[0]: --help reads the same however the program is started
  app.footer(kExitCodes);
  app.require_subcommand(1);
  Args args;
  std::vector<Command> commands;
  AddInspect(app, args, commands);
  AddOutputs(app, args, commands);
  AddChecks(app, args, commands);
  AddView(app, args, commands);
  shardify::cli::CheckIntegerOptions(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? t::kExitOk : t::kExitUsage;
  }
  Status st;
  for (auto& [cmd, run] : commands) {
    if (*cmd) st = CatchAllocationFailure(run, [&, name = cmd->get_name()] { return name + ": out of memory"; });
  }
  std::cout.flush();
  if (!st.ok()) std::cerr << "shardtool: " << st.ToString() << "\n";
  return t::ExitCodeFor(st);
}
