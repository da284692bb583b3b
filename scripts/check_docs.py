#!/usr/bin/env python3
"""Every relative link of the Markdown docs (README.md and the other top-level pages,
docs/, docs/reference/, format/FORMAT.md) names a file that exists and, with #anchor, a
heading of it. Prints each broken link; exits 1."""
import glob
import os
import re
import sys


def slug(title):
    s = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return s.replace(" ", "-")


def anchors(path):
    out, code = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            code = not code
        m = None if code else re.match(r"^(#+) (.*)$", line)
        if m:
            out.add(slug(m.group(2)))
    return out


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    broken = []
    pages = sorted(glob.glob("*.md")) + ["format/FORMAT.md"]
    for page in pages + sorted(glob.glob("docs/*.md") + glob.glob("docs/reference/*.md")):
        text = open(page, encoding="utf-8").read()
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            href = m.group(1)
            if re.match(r"^[a-z]+:", href):
                continue
            path, _, anchor = href.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(target):
                broken.append("%s: %s: no such file" % (page, href))
            elif anchor and target.endswith(".md") and anchor not in anchors(target):
                broken.append("%s: %s: no such heading" % (page, href))
    for b in broken:
        print("docs: " + b, file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
