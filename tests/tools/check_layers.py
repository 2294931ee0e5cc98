#!/usr/bin/env python3
"""Checks that the engine's folders include only what they depend on.

The folders are libraries with one-way dependencies (ARCHITECTURE.md):
grammar/base (the ground floor: status, checks, UTF-8, the `re` reader) <-
grammar <- lexer, parser <- maskstore <- streamline, and inside runtime/ the
decode library (runtime/ itself, on maskstore only: decoding never reaches the
compile), the compile driver (runtime/compile/, on streamline), the offline
tools (runtime/tools/, on both), the command (runtime/cli/) and the Python
binding (runtime/python/) on the tools.  A file belongs to the deepest layer
whose folder holds it; every `#include "PATH"` of an engine header must name
a file of the same layer or of one it depends on, directly or not.  Run by
CMake at configure time and as the test `check_layers`; exits 1 listing each
backward include.

usage: check_layers.py [SOURCE_ROOT]
"""

import os
import re
import sys

# Direct dependencies, as declared in each folder's CMakeLists.txt.
DEPENDS = {
    "grammar/base": [],
    "grammar": ["grammar/base"],
    "lexer": ["grammar"],
    "parser": ["grammar"],
    "maskstore": ["lexer", "parser"],
    "streamline": ["maskstore"],
    "runtime": ["maskstore"],
    "runtime/compile": ["streamline"],
    "runtime/tools": ["runtime", "runtime/compile"],
    "runtime/cli": ["runtime/tools"],
    "runtime/python": ["runtime/tools"],
}
SOURCES = (".h", ".cc", ".cu", ".yy", ".ll", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:[a-z_]+/)+)[^"/]+"', re.M)


def layer_of(path):
    """The deepest layer whose folder holds `path` (a '/'-separated path from
    the source root), or None outside the engine."""
    best = None
    for layer in DEPENDS:
        if path.startswith(layer + "/") and (best is None or len(layer) > len(best)):
            best = layer
    return best


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
    for folder in [f for f in DEPENDS if "/" not in f]:
        base = os.path.join(root, folder)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                layer = layer_of(rel)
                ok = allowed(layer)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    target = layer_of(m.group(1))
                    if target is not None and target not in ok:
                        line = text.count("\n", 0, m.start()) + 1
                        errors.append(f"{rel}:{line}: {layer}/ includes {target}/, "
                                      f"which it does not depend on")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
