#!/usr/bin/env python3
"""What a C++ program of others gets: installs the build into a fresh prefix, checks the
headers (every one in the table of docs/cpp.md, every header one of them includes installed
too), then builds examples/ on its own against the prefix with find_package(shardify) and
runs the two programs.

    check_install.py SOURCE_DIR BUILD_DIR WORK_DIR"""
import os
import re
import shutil
import subprocess
import sys


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def documented_headers(source):
    """The headers in the first column of docs/cpp.md's table of public headers."""
    text = open(os.path.join(source, "docs", "cpp.md"), encoding="utf-8").read()
    table = text[text.index("## Public headers"):]
    out = set()
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            if out:
                break
            continue
        first = line.split("|")[1]
        out.update(re.findall(r"`([a-z]+/[a-z_]+\.h)`", first))
    return out


def main():
    source, build, work = (os.path.abspath(p) for p in sys.argv[1:4])
    shutil.rmtree(work, ignore_errors=True)
    prefix = os.path.join(work, "prefix")
    run(["cmake", "--install", build, "--prefix", prefix], stdout=subprocess.DEVNULL)

    include = os.path.join(prefix, "include", "shardify")
    installed = set()
    for root, _, files in os.walk(include):
        installed.update(os.path.relpath(os.path.join(root, f), include) for f in files)
    problems = []
    documented = documented_headers(source)
    for h in sorted(installed - documented):
        problems.append("%s is installed but not in docs/cpp.md's table" % h)
    for h in sorted(documented - installed):
        problems.append("%s is in docs/cpp.md's table but not installed" % h)
    for h in sorted(installed):
        for inc in re.findall(r'^#include "([^"]+)"', open(os.path.join(include, h)).read(), re.M):
            if inc not in installed:
                problems.append("%s includes %s, which is not installed (not public)" % (h, inc))
    if problems:
        sys.exit("check_install: " + "\n  ".join(problems))
    print("check_install: %d headers installed, each documented, each include installed" % len(installed))

    # examples/ as a project of its own, finding shardify through the prefix alone.
    out = os.path.join(work, "examples-build")
    run(["cmake", "-S", os.path.join(source, "examples"), "-B", out, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DCMAKE_PREFIX_PATH=" + prefix], stdout=subprocess.DEVNULL)
    run(["cmake", "--build", out])
    data = os.path.join(work, "example-dataset")
    run([os.path.join(out, "write_dataset"), data])
    run([os.path.join(out, "read_batches"), data, "train"])
    shutil.rmtree(work, ignore_errors=True)
    print("check_install: examples built against the installed package and ran")


if __name__ == "__main__":
    main()
