// idx2png: writes an MNIST-style idx pair as class-folder PNGs.
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>

#include "base/cli.h"
#include "base/parallel.h"
#include "convert/programs/idx2png.h"

namespace {
std::atomic<bool> g_cancel{false};
extern "C" void OnSignal(int) { g_cancel = true; }
}  // namespace

int main(int argc, char** argv) {
  shardify::convert::IdxToPngOptions o;
  CLI::App app{
      "idx2png: write an MNIST-style idx images + labels pair (.gz or plain) as\n"
      "class-folder PNGs OUT/<class>/<prefix><index>.png, index = 5-digit position in the file.\n"
      "Example: idx2png train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz -o fmnist/train"};
  app.name("idx2png");  // not argv[0]: --help reads the same however the program is started
  std::string classes;
  o.threads = static_cast<int>(shardify::CoreCount());
  app.add_option("IMAGES", o.images, "*-images-idx3-ubyte[.gz] (u8 [N, H, W] or [N, H, W, C])")->required();
  app.add_option("LABELS", o.labels, "*-labels-idx1-ubyte[.gz] (u8 [N])")->required();
  app.add_option("-o,--output", o.out, "Output directory (created)")->required();
  app.add_option("--classes", classes,
                 "Comma-separated folder names for labels 0, 1, ... ('/' becomes '_';\n"
                 "default: the label number)");
  app.add_option("--prefix", o.prefix, "File name prefix, e.g. test- to add a second file to the same folders");
  app.add_option("--limit", o.limit, "Write only the first N images (default: all)");
  app.add_option("--threads", o.threads, "Writer threads (default: all cores)")->check(CLI::Range(1, 1024));
  shardify::cli::CheckIntegerOptions(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; every usage error is 2, as documented
  }
  std::string cur;
  for (char c : classes + ",") {
    if (c == ',') {
      if (!cur.empty()) o.classes.push_back(cur);
      cur.clear();
    } else
      cur += c;
  }
  o.cancel = &g_cancel;
  std::signal(SIGINT, OnSignal);
  auto n = shardify::convert::IdxToPng(o);
  if (!n.ok()) {
    std::fprintf(stderr, "idx2png: %s\n", n.status().ToString().c_str());
    return 1;
  }
  std::printf("wrote %llu PNG files under %s\n", static_cast<unsigned long long>(*n), o.out.c_str());
  return 0;
}
