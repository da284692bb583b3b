#!/usr/bin/env python3
"""Writes the command-line reference, docs/reference/<program>.md, from the --help of the
built programs (BUILD/bin/<program>) and of each of their commands, so that the pages say
what the CLI11 definitions say. With --check it writes nothing: it prints a unified diff
of each page that differs from its program's help and exits 1. A program named (or, with
no names, any of them) that is not in BUILD/bin is an error, never skipped.

    python3 scripts/gen_reference.py build                      # write every page
    python3 scripts/gen_reference.py --check build shardtool    # compare one (CTest does)

The check of shardify also compares the layouts that docs/converting.md's tables list (their
first column, `layout`) with those of `shardify --help` (kLayouts in convert/sources/layouts.cpp),
name for name and in order: the tables say more than --help, so they are kept by hand.
Standard library only."""
import argparse
import difflib
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGES = "docs/reference"
# Each program with what it is for (the page's first line); commands that CLI11 lists under
# "Subcommands:" are found in the help, commands a program dispatches itself are named here.
PROGRAMS = {
    "shardify": "converts an image dataset into shards",
    "shardtool": "inspects, verifies, exports and benchmarks shard datasets",
    "shardtrain": "trains a model on shard datasets and predicts with it",
    "idx2png": "writes MNIST-style idx files as class-folder PNGs",
}
OWN_COMMANDS = {"shardify": ["merge"]}


def run_help(build, program, command):
    """The --help text of `program [command]`, without trailing spaces or surrounding blank lines.
    argv[0] is the bare name, so nothing of this machine's paths can appear in it."""
    path = os.path.join(build, "bin", program)
    args = [program] + ([command] if command else []) + ["--help"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(args, executable=path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=60)
    if done.returncode != 0:
        raise SystemExit("gen_reference: `%s --help` exited with %d:\n%s" %
                         (" ".join(args[:-1]), done.returncode, done.stderr.decode(errors="replace")))
    lines = [line.rstrip() for line in done.stdout.decode().splitlines()]
    return "\n".join(lines).strip("\n")


def subcommands(help_text):
    """The names listed under "Subcommands:" in a CLI11 help, in their order."""
    names, inside = [], False
    for line in help_text.splitlines():
        if line == "Subcommands:":
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            m = re.match(r"^  (\S+)", line)
            if m:
                names.append(m.group(1))
    return names


def page(build, program):
    """The Markdown of `program`'s page: a heading and a code block per command."""
    top = run_help(build, program, None)
    commands = subcommands(top) + OWN_COMMANDS.get(program, [])
    intro = ("`%s` %s. This page is made from `%s --help`%s by `scripts/gen_reference.py`: do not edit it by "
             "hand. After changing an option, run `python3 scripts/gen_reference.py build`; until then the test "
             "`docs.reference.%s` fails." %
             (program, PROGRAMS[program], program, " and each command's `--help`" if commands else "", program))
    out = ["# %s" % program, "", textwrap.fill(intro, 90, break_on_hyphens=False), ""]
    if commands:
        links = ", ".join("[%s](#%s-%s)" % (c, program, c) for c in commands)
        out += [textwrap.fill("Commands: %s." % links, 90, break_on_hyphens=False), ""]
    sections = [(program, top)] + [("%s %s" % (program, c), run_help(build, program, c)) for c in commands]
    for title, text in sections:
        out += ["## %s" % title, "", "```text", text, "```", ""]
    return "\n".join(out)


def layouts_of_help(help_text):
    """The layout names of shardify's --layout option: "auto, folder, csv ... or idx"."""
    m = re.search(r"^  --layout \S+ +(.*)$", help_text, re.M)
    if not m:
        return None
    names = re.split(r", | or ", m.group(1).strip())
    return [n for n in names if n != "auto"]


def check_layout_tables(build):
    """Problems of the tables of docs/converting.md whose first column is `layout`."""
    expected = layouts_of_help(run_help(build, "shardify", None))
    if not expected:
        return ["shardify --help has no --layout line listing the layouts"]
    doc = "docs/converting.md"
    problems, rows, in_table, tables = [], [], False, 0
    lines = open(os.path.join(ROOT, doc), encoding="utf-8").read().splitlines() + [""]
    for number, line in enumerate(lines, 1):
        if re.match(r"^\| *layout *\|", line):
            in_table, rows, start = True, [], number
        elif in_table and line.startswith("|"):
            m = re.match(r"^\| *`([^`]+)` *\|", line)
            if m:
                rows.append(m.group(1))
        elif in_table:
            in_table, tables = False, tables + 1
            if rows != expected:
                problems.append("%s:%d: the table lists the layouts %s; shardify --help (kLayouts in "
                                "convert/sources/layouts.cpp) has %s" % (doc, start, ", ".join(rows), ", ".join(expected)))
    if tables == 0:
        problems.append("%s: no table with a first column `layout` found" % doc)
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the pages instead of writing them")
    parser.add_argument("build", help="the build directory (its bin/ holds the programs)")
    parser.add_argument("programs", nargs="*", metavar="PROGRAM",
                        help="only these (default: %s)" % ", ".join(sorted(PROGRAMS)))
    args = parser.parse_args()
    unknown = [p for p in args.programs if p not in PROGRAMS]
    if unknown:
        parser.error("unknown program %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(PROGRAMS))))
    programs = args.programs or sorted(PROGRAMS)
    missing = [p for p in programs if not os.path.isfile(os.path.join(args.build, "bin", p))]
    if missing:
        print("gen_reference: not built in %s/bin: %s. Build them first (cmake --build %s --target %s)" %
              (args.build, ", ".join(missing), args.build, " ".join(missing)), file=sys.stderr)
        return 1
    status = 0
    for program in programs:
        name = "%s/%s.md" % (PAGES, program)
        path = os.path.join(ROOT, name)
        text = page(args.build, program)
        if not args.check:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print("gen_reference: wrote %s" % name)
            continue
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), name,
                                                       "%s --help" % program))
            sys.stdout.flush()
            print("gen_reference: %s differs from the help of %s/bin/%s; regenerate it with\n"
                  "  python3 scripts/gen_reference.py %s" % (name, args.build, program, args.build), file=sys.stderr)
            status = 1
    if "shardify" in programs:
        for problem in check_layout_tables(args.build):
            print("gen_reference: " + problem, file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
