#!/usr/bin/python3
"""Run the ```python code blocks of a Markdown page in order, in one namespace (a notebook).

usage: scripts/run_python_doc.py [PAGE.md] [--figure-dir DIR]

Used by the test python.test_api_walkthrough (the walk-through in docs/python.md runs as
written) and to make that page's figure: `scripts/run_python_doc.py docs/python.md
--figure-dir docs/img` (from the repository root, after the README's build; the page finds the
data in ../shared/data or $VELOX_DATA_DIR and the library in build/miles.h5 or $VELOX_LIBRARY).
Blocks fenced as ```python run; other blocks (```, ```bash) are shown only.
"""
import argparse
import os
import re
import sys

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(path):
    """The ```python blocks of a Markdown file, with their first line numbers."""
    text = open(path, encoding="utf-8").read()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def run(path, namespace=None):
    """Execute every block of `path` in `namespace` (a fresh dict by default); returns it.
    An exception propagates with the page's line numbers in its traceback."""
    ns = {"__name__": "__doc__"} if namespace is None else namespace
    for line, code in python_blocks(path):
        exec(compile("\n" * (line - 1) + code, path, "exec"), ns)
    return ns


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", nargs="?", default="docs/python.md")
    ap.add_argument("--figure-dir", help="where the page saves its figures ($VELOX_FIGURE_DIR)")
    args = ap.parse_args()
    if args.figure_dir:
        os.environ["VELOX_FIGURE_DIR"] = args.figure_dir
    os.environ.setdefault("MPLBACKEND", "Agg")
    run(args.page)


if __name__ == "__main__":
    sys.exit(main())
