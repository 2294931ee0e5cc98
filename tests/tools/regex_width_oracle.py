#!/usr/bin/env python3
"""Lark's width of each pattern in a file: the oracle of tests/regex_width_test.cc.

Reads one pattern a line, as the hex of its UTF-8 bytes, and prints one line
per pattern: "lo hi" from lark.utils.get_regexp_width() (the width Lark sorts
joined alternatives and its lexer's terminals by; re._parser's getwidth()
after `\\p{...}` became one letter), or "E" when Lark raises; then, after a
tab, "lo hi" of re._parser's getwidth() of the pattern itself (what the
lexer's CompileRegex reports), or "E" when re._parser refuses it.

usage: regex_width_oracle.py PATTERNS.hex
"""
import sys

from re import _parser as sre_parse

from lark.utils import get_regexp_width


def main():
    out = []
    with open(sys.argv[1], encoding="ascii") as f:
        for line in f:
            pattern = bytes.fromhex(line.strip()).decode("utf-8")
            try:
                lo, hi = get_regexp_width(pattern)
                lark = f"{int(lo)} {int(hi)}"
            except Exception:  # noqa: BLE001 -- any refusal is one answer
                lark = "E"
            try:
                lo, hi = sre_parse.parse(pattern).getwidth()
                sre = f"{int(lo)} {int(hi)}"
            except Exception:  # noqa: BLE001
                sre = "E"
            out.append(f"{lark}\t{sre}")
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))


if __name__ == "__main__":
    main()
