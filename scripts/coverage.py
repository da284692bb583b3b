#!/usr/bin/env python3
"""Line coverage of the product code (not tests, benchmarks or generated files) after the
tests ran in a build made with -DSHARDIFY_COVERAGE=ON, per folder and in all, from gcov's
counts read by gcovr (Debian: gcovr).

    python3 scripts/coverage.py BUILD_DIR [--floor PERCENT] [--jobs N]

Prints one line per folder (C++ and the Python binding's sources) and the total; exits 1
when the total is below --floor."""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

# The product's folders: each line of the table.
FOLDERS = ("base", "storage", "format", "media", "reader", "convert", "trainer", "tools", "python/src")


def folder_of(path):
    for f in FOLDERS:
        if path == f or path.startswith(f + "/"):
            return f
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", help="the build folder (made with -DSHARDIFY_COVERAGE=ON, its tests run)")
    ap.add_argument("--floor", type=float, default=0.0, help="fail below this total line coverage, in percent")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="gcov processes at once")
    a = ap.parse_args()
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    build = os.path.abspath(a.build)
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        # Counters that threads update at once can come out negative in gcov's branch lines,
        # which gcovr cannot parse; the line counts this reads are not affected.
        cmd = ["gcovr", "-r", root, "--object-directory", build, "-j", str(max(1, a.jobs)), "--json-summary", summary,
               "--gcov-ignore-parse-errors"]
        for f in FOLDERS:
            cmd += ["--filter", os.path.join(root, f) + "/"]
        try:
            run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except FileNotFoundError:
            sys.exit("coverage: gcovr not found (Debian package gcovr; scripts/install-deps.sh installs it)")
        if run.returncode != 0:
            sys.exit("coverage: gcovr failed:\n" + run.stderr)
        files = json.load(open(summary))["files"]
    covered, total = collections.Counter(), collections.Counter()
    for f in files:
        folder = folder_of(f["filename"])
        if folder is None:
            continue
        covered[folder] += f["line_covered"]
        total[folder] += f["line_total"]
    if not sum(total.values()):
        sys.exit("coverage: no counts under %s (built with -DSHARDIFY_COVERAGE=ON, and its tests run?)" % build)
    print("line coverage of the product code, by folder (%s):" % a.build)
    for f in FOLDERS:
        if total[f]:
            print("  %-11s %6.1f%%  %6d of %6d lines" % (f + "/", 100.0 * covered[f] / total[f], covered[f], total[f]))
    percent = 100.0 * sum(covered.values()) / sum(total.values())
    print("  %-11s %6.1f%%  %6d of %6d lines" % ("all", percent, sum(covered.values()), sum(total.values())))
    if percent < a.floor:
        sys.exit("coverage: %.1f%% of the lines is below the floor of %.1f%%" % (percent, a.floor))


if __name__ == "__main__":
    main()
