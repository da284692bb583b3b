#!/usr/bin/env python3
"""Runs the code blocks of README.md and docs/*.md as their markers say, and compares the
outputs the pages show with what the commands print (docs/extending.md, "Tests of the
documentation", is the reference for the markers).

  run_blocks.py --check [PAGE...]     every block that needs a marker has a valid one
                                      (default: README.md and docs/*.md)
  run_blocks.py --build DIR PAGE...   run each page's blocks, in order, in a fresh directory
                                      per page; prints each block's seconds; exits 1 on the
                                      first block that fails or prints something else

Python 3 standard library only. Python blocks run with the interpreter that runs this script.
"""
import argparse
import difflib
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SHELL = {"sh", "bash", "shell"}
PYTHON = {"python", "py"}
CPP = {"cpp", "c++"}
CONSOLE = "console"
MARKER = re.compile(r"^\s*<!--\s*doc:(.*?)-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
# Folders of the source tree that a page's directory links to, so that commands typed at the
# top of a checkout (build/bin/shardify, python3 scripts/launch.py, ...) find them.
LINKED = ("scripts", "python", "bench", "examples")
# A class-folder PNG set that blocks may name through a substitution: made in the page's
# directory before the first block that names it.
SMALL_PNG = "small-fmnist-png"
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
CLASSES = "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot"
BLOCK_TIMEOUT_S = 240  # CTest gives a page 300


class DocError(Exception):
    pass


class Block:
    def __init__(self, page, line, lang, lines, marker):
        self.page, self.line, self.lang, self.lines = page, line, lang, lines
        self.kind, self.reason, self.id, self.of, self.subs = None, None, None, None, []
        if marker is not None:
            self._parse_marker(marker)

    def where(self):
        return "%s:%d" % (self.page, self.line)

    def needs_marker(self):
        if self.lang in SHELL | PYTHON | CPP or self.lang == CONSOLE:
            return True
        return self.lang == "" and any(l.startswith("$ ") for l in self.lines)

    def _parse_marker(self, text):
        text = text.strip()
        show = re.match(r"^show\s*\((.+)\)$", text)
        if show:
            self.kind, self.reason = "show", show.group(1).strip()
            return
        try:
            words = shlex.split(text)
        except ValueError as e:
            raise DocError("%s: marker '%s': %s" % (self.where(), text, e))
        if not words or words[0] not in ("run", "output", "show"):
            raise DocError("%s: marker '%s': expected run, show (REASON) or output of=ID" %
                           (self.where(), text))
        self.kind = words[0]
        if self.kind == "show":
            raise DocError("%s: 'show' needs its reason in parentheses: show (needs a GPU)" % self.where())
        for w in words[1:]:
            key, eq, value = w.partition("=")
            if not eq or not value:
                raise DocError("%s: marker word '%s' is not KEY=VALUE" % (self.where(), w))
            if self.kind == "output" and key == "of":
                self.of = value
            elif self.kind == "run" and key == "id":
                self.id = value
            elif self.kind == "run" and key == "sub":
                old, arrow, new = value.partition(" => ")
                if not arrow or not old:
                    raise DocError("%s: sub='%s' is not \"OLD => NEW\"" % (self.where(), value))
                self.subs.append((old, new))
            else:
                raise DocError("%s: '%s' is not an option of '%s'" % (self.where(), key, self.kind))
        if self.kind == "output" and not self.of:
            raise DocError("%s: an output block names its run block: output of=ID" % self.where())

    def text(self):
        """The block's text with its substitutions applied; each must apply at least once."""
        text = "\n".join(self.lines) + "\n"
        for old, new in self.subs:
            if old not in text:
                raise DocError("%s: sub '%s => %s': '%s' is not in the block" % (self.where(), old, new, old))
            text = text.replace(old, new)
        return text


def parse(page):
    """The fenced blocks of `page` (a path under ROOT), markers checked."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    blocks, marker, i = [], None, 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            marker = (m.group(1), i + 1)
            i += 1
            continue
        f = FENCE.match(lines[i])
        if not f:
            if marker and lines[i].strip():
                raise DocError("%s:%d: a doc marker must be the line just before a fence" % (page, marker[1]))
            marker = None if lines[i].strip() else marker
            i += 1
            continue
        indent, fence, lang = len(f.group(1)), f.group(2), f.group(3).lower()
        start, body, i = i + 1, [], i + 1
        while i < len(lines) and not re.match(r"^\s*%s%s*\s*$" % (re.escape(fence), fence[0]), lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i].lstrip())
            i += 1
        if i == len(lines):
            raise DocError("%s:%d: the fence is never closed" % (page, start))
        if marker and marker[1] != start - 1:
            raise DocError("%s:%d: a doc marker must be the line just before a fence" % (page, marker[1]))
        blocks.append(Block(page, start, lang, body, marker[0] if marker else None))
        marker, i = None, i + 1
    check(blocks)
    return blocks


def check(blocks):
    unmarked = ["%s: a %s block without a marker" % (b.where(), b.lang or "command")
                for b in blocks if b.kind is None and b.needs_marker()]
    if unmarked:
        raise DocError("\ndocs: ".join(unmarked) + "\n  put <!-- doc: run -->, <!-- doc: show (WHY) --> or "
                       "<!-- doc: output of=ID --> on the line before each (docs/extending.md)")
    ids = {}
    for b in blocks:
        if b.kind == "run":
            b.text()  # every substitution applies
            if b.lang in CPP:
                raise DocError("%s: C++ blocks are show: whole programs live in examples/, which CTest "
                               "builds and runs" % b.where())
            if b.lang not in SHELL | PYTHON and b.lang != CONSOLE:
                raise DocError("%s: cannot run a block of language '%s'" % (b.where(), b.lang))
            if b.id:
                if b.id in ids:
                    raise DocError("%s: id=%s is also %s" % (b.where(), b.id, ids[b.id].where()))
                ids[b.id] = b
        if b.kind == "output":
            if b.of not in ids:
                raise DocError("%s: output of=%s: no run block above has id=%s" % (b.where(), b.of, b.of))
            if ids[b.of].lang == CONSOLE:
                raise DocError("%s: a console block shows its own output" % b.where())


# ---------------------------------------------------------------------------------------
# Comparing outputs

DURATION = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?\s?"
    r"(?:ms|µs|us|ns|s|min|h|[KMGT]i?B/s|B/s|[a-z]+/s)(?![\w/])")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?")


def normalize(line, workdir):
    """What the comparison sees of a line: times, rates and timestamps as placeholders, the
    page's directory as '.', no trailing blanks."""
    line = line.replace(workdir + "/", "./").replace(workdir, ".")
    line = TIMESTAMP.sub("<timestamp>", line)
    return DURATION.sub("<time>", line).rstrip()


def matches(expected, actual):
    """`expected` against `actual`, both normalized line lists. A line '...' stands for any
    lines (none included); a line ending in '...' for any line starting with what precedes."""
    memo = {}

    def at(i, j):
        if (i, j) not in memo:
            if i == len(expected):
                memo[(i, j)] = j == len(actual)
            elif expected[i].strip() == "...":
                memo[(i, j)] = any(at(i + 1, k) for k in range(j, len(actual) + 1))
            elif j == len(actual):
                memo[(i, j)] = False
            elif expected[i].endswith("..."):
                memo[(i, j)] = actual[j].startswith(expected[i][:-3].rstrip()) and at(i + 1, j + 1)
            else:
                memo[(i, j)] = expected[i] == actual[j] and at(i + 1, j + 1)
        return memo[(i, j)]

    sys.setrecursionlimit(max(10000, 4 * (len(expected) + len(actual))))
    return at(0, 0)


def compare(block, what, expected, actual, workdir):
    exp = [normalize(l, workdir) for l in expected]
    act = [normalize(l, workdir) for l in actual]
    while act and not act[-1]:
        act.pop()
    while exp and not exp[-1]:
        exp.pop()
    if not matches(exp, act):
        diff = "\n".join(difflib.unified_diff(exp, act, "the page", "the run", lineterm=""))
        raise DocError("%s: %s differs from what the page shows (times and rates ignored):\n%s" %
                       (block.where(), what, diff))


# ---------------------------------------------------------------------------------------
# Running


def environment(workdir, build):
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([os.path.join(workdir, "build", "bin"), bindir, env.get("PATH", "")])
    env["PYTHONPATH"] = os.path.join(build, "python")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HOME"] = os.path.join(workdir, "home")  # ~/... stays inside the page's directory
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "SHARDIFY_CACHE_DIR"):
        env.pop(name, None)
    return env


def prepare(workdir, build):
    os.symlink(build, os.path.join(workdir, "build"))
    for name in LINKED:
        os.symlink(os.path.join(ROOT, name), os.path.join(workdir, name))
    os.mkdir(os.path.join(workdir, "home"))


def make_small_png(workdir, env):
    idx2png = os.path.join(workdir, "build", "bin", "idx2png")
    for split, limit, prefix in (("train", 1000, []), ("t10k", 200, ["--prefix", "test-"])):
        subprocess.run([idx2png, "%s/%s-images-idx3-ubyte.gz" % (FASHION_MNIST, split),
                        "%s/%s-labels-idx1-ubyte.gz" % (FASHION_MNIST, split), "-o", SMALL_PNG,
                        "--classes", CLASSES, "--limit", str(limit), "--threads", "2"] + prefix,
                       cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL)


def execute(argv, workdir, env, block, stdin=None, verbose=False):
    """Runs `argv` in a session of its own, so that a block that outlives its time is ended
    with every process it started."""
    p = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(stdin, timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise DocError("%s: still running after %d s" % (block.where(), BLOCK_TIMEOUT_S))
    out = out.decode("utf-8", "replace")
    if verbose:
        print(out, end="", flush=True)
    return p.returncode, out


def fail(block, text, output, why):
    shown = "\n".join("    " + l for l in text.rstrip("\n").split("\n"))
    tail = "\n".join(output.rstrip("\n").split("\n")[-40:])
    raise DocError("%s: %s\n  the block as run:\n%s\n  its output (last 40 lines):\n%s" %
                   (block.where(), why, shown, tail))


def run_script(block, text, workdir, env, verbose):
    if block.lang in PYTHON:
        path = os.path.join(workdir, ".doc-block-%d.py" % block.line)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        rc, out = execute([sys.executable, path], workdir, env, block, verbose=verbose)
    else:
        rc, out = execute(["bash", "-euo", "pipefail", "-s"], workdir, env, block, text.encode(), verbose)
    if rc != 0:
        fail(block, text, out, "exited with %d" % rc)
    return out


# Each command of a console block is followed by a line carrying its exit status, so that the
# output splits per command; a command may fail only when the next one shows its status.
STATUS = "\x1edoc-status"


def run_console(block, text, workdir, env, verbose):
    commands, expected, current = [], [], None
    for line in text.rstrip("\n").split("\n"):
        if current is not None and commands[-1].endswith("\\"):
            commands[-1] += "\n" + line
        elif line.startswith("$ "):
            commands.append(line[2:])
            expected.append([])
            current = len(commands) - 1
        elif current is None:
            raise DocError("%s: a console block starts with a '$ ' command" % block.where())
        else:
            expected[current].append(line)
    # The status is printed, then given back to $? for a following 'echo $?'.
    script = "exec 2>&1\ndoc_status() { return $1; }\n" + "".join(
        "%s\ndoc_rc=$?; echo \"%s $doc_rc\"; doc_status $doc_rc\n" % (c, STATUS) for c in commands)
    rc, out = execute(["bash", "-s"], workdir, env, block, script.encode(), verbose)
    parts = out.split(STATUS)
    outputs, statuses = [], []
    for k, part in enumerate(parts):
        if k > 0:
            status, _, part = part.partition("\n")
            statuses.append(int(status))
        outputs.append(part)
    if len(statuses) != len(commands):
        fail(block, text, out, "the shell ended after %d of %d commands" % (len(statuses), len(commands)))
    for k, command in enumerate(commands):
        shows_status = k + 1 < len(commands) and commands[k + 1].strip() == "echo $?"
        if statuses[k] != 0 and not shows_status:
            fail(block, text, outputs[k], "'%s' exited with %d" % (command, statuses[k]))
        compare(block, "the output of '%s'" % command, expected[k], outputs[k].split("\n"), workdir)


def run_page(page, build, keep, verbose):
    blocks = parse(page)
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="doc-%s-" % os.path.basename(page)[:-3]))
    env = environment(workdir, build)
    prepare(workdir, build)
    outputs, ran, start = {}, 0, time.monotonic()
    try:
        for b in blocks:
            if b.kind == "output":
                compare(b, "the output of the block id=%s" % b.of, b.lines, outputs[b.of].split("\n"), workdir)
                continue
            if b.kind != "run":
                continue
            text = b.text()
            t0 = time.monotonic()
            if SMALL_PNG in text and not os.path.isdir(os.path.join(workdir, SMALL_PNG)):
                make_small_png(workdir, env)
            if b.lang == CONSOLE:
                run_console(b, text, workdir, env, verbose)
            else:
                outputs[b.id] = run_script(b, text, workdir, env, verbose)
            ran += 1
            print("  %-28s %-7s %6.2f s" % (b.where(), b.lang, time.monotonic() - t0), flush=True)
    finally:
        if keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    shown = sum(1 for b in blocks if b.kind == "show")
    print("%s: %d block(s) run, %d shown only, %.1f s" % (page, ran, shown, time.monotonic() - start))


def pages(args):
    if args:
        return [os.path.relpath(os.path.abspath(p), ROOT) for p in args]
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="check the markers only")
    ap.add_argument("--build", help="the build directory (programs in BUILD/bin, the package in BUILD/python)")
    ap.add_argument("--keep", action="store_true", help="keep each page's directory")
    ap.add_argument("--verbose", action="store_true", help="print what each block prints")
    ap.add_argument("pages", nargs="*")
    args = ap.parse_args()
    if not args.check and (not args.build or not args.pages):
        ap.error("give --check, or --build DIR and the pages to run")
    failed = 0
    for page in pages(args.pages):
        try:
            if args.check:
                parse(page)
            else:
                run_page(page, os.path.realpath(args.build), args.keep, args.verbose)
        except DocError as e:
            print("docs: %s" % e, file=sys.stderr)
            failed += 1
            if not args.check:
                break
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
