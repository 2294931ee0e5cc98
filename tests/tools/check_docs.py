#!/usr/bin/env python3
"""Checks that the engine's folder READMEs and file heads point at what exists.

- Every source file of a product folder (grammar/, lexer/, parser/, maskstore/,
  streamline/, runtime/, and their subfolders) is named in that folder's
  README.md: by its name (`session.cc`), its path from the folder
  (`regex/regex_parser.cc`), or its stem with any extension (`session.*`,
  `session.{h,cc}`, `session.h/.cc`).  A subfolder with a README of its own
  (runtime/python/) lists its own files.
- Every test a README or a product source names (`x_test.cc`, `test_x.py`)
  exists under tests/, and every "Tested by" in them names at least one.

Run by CMake as the test `check_docs`; exits 1 listing each problem.

usage: check_docs.py [SOURCE_ROOT]
"""

import os
import re
import sys

FOLDERS = ["grammar", "lexer", "parser", "maskstore", "streamline", "runtime"]
SOURCES = (".h", ".cc", ".cu", ".yy", ".ll", ".inc", ".py")
SKIP_DIRS = {"__pycache__", "tests", "lark"}  # grammar/lark holds grammars, with its own README
TEST_NAME = re.compile(r"\b((?:[\w.-]+/)*(?:[a-z0-9_]+_test\.cc|test_[a-z0-9_]+\.py))\b")
TESTED_BY = re.compile(r"[Tt]ested by\b(?! \|)(.{0,240})", re.S)


def test_files(root):
    found = set()
    for dirpath, _, files in os.walk(os.path.join(root, "tests")):
        for name in files:
            found.add(name)
            found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def listed(readme, rel, name):
    stem = name.rsplit(".", 1)[0]
    if rel in readme or name in readme:
        return True
    return any(stem + suffix in readme for suffix in (".*", ".{", ".h/", ".cc/"))


def check_tests(path, text, tests, errors, root):
    rel = os.path.relpath(path, root)
    for m in TEST_NAME.finditer(text):
        name = m.group(1)
        if name not in tests and os.path.basename(name) not in tests:
            line = text.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}:{line}: names {name}, which is not a test under tests/")
    for m in TESTED_BY.finditer(text):
        if not TEST_NAME.search(m.group(1)):
            line = text.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}:{line}: 'Tested by' names no test file")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    tests = test_files(root)
    errors = []
    for folder in FOLDERS:
        base = os.path.join(root, folder)
        for dirpath, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            # The README that lists this folder's files: its own, else the
            # nearest one above it inside the product folder.
            owner = dirpath
            while not os.path.exists(os.path.join(owner, "README.md")) and owner != base:
                owner = os.path.dirname(owner)
            readme_path = os.path.join(owner, "README.md")
            readme = open(readme_path, encoding="utf-8").read() if os.path.exists(readme_path) else ""
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                if name == "README.md":
                    check_tests(path, open(path, encoding="utf-8").read(), tests, errors, root)
                    continue
                if not name.endswith(SOURCES):
                    continue
                rel = os.path.relpath(path, owner)
                if not listed(readme, rel, name):
                    errors.append(f"{os.path.relpath(path, root)}: not listed in "
                                  f"{os.path.relpath(readme_path, root)}")
                with open(path, encoding="utf-8", errors="replace") as f:
                    check_tests(path, f.read(), tests, errors, root)
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
