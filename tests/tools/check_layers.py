#!/usr/bin/env python3
"""Checks that the engine's folders include only what they depend on.

The folders are libraries with one-way dependencies (ARCHITECTURE.md):
grammar <- lexer, parser <- maskstore <- streamline <- runtime.  Every
`#include "FOLDER/..."` in a folder's sources must name the folder itself or
one it depends on, directly or not.  Run by CMake at configure time and as the
test `check_layers`; exits 1 listing each backward include.

usage: check_layers.py [SOURCE_ROOT]
"""

import os
import re
import sys

# Direct dependencies, as declared in each folder's CMakeLists.txt.
DEPENDS = {
    "grammar": [],
    "lexer": ["grammar"],
    "parser": ["grammar"],
    "maskstore": ["lexer", "parser"],
    "streamline": ["maskstore"],
    "runtime": ["streamline"],
}
SOURCES = (".h", ".cc", ".cu", ".yy", ".ll", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def allowed(folder):
    seen = {folder}
    todo = [folder]
    while todo:
        for dep in DEPENDS[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    errors = []
    for folder in DEPENDS:
        ok = allowed(folder)
        base = os.path.join(root, folder)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    target = m.group(1)
                    if target in DEPENDS and target not in ok:
                        line = text.count("\n", 0, m.start()) + 1
                        rel = os.path.relpath(path, root)
                        errors.append(f"{rel}:{line}: {folder}/ includes {target}/, "
                                      f"which it does not depend on")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
