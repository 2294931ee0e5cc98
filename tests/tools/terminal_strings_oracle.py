"""Exhaustive oracle for terminal_strings_test.cc: Python's re on the terminals
of real grammars and on the Unicode classes.

For every terminal pattern (to_regexp()) of python.lark, lark.lark,
common.lark and the project's grammar/lark/*.lark: every string up to length
L over an alphabet made of the pattern's own characters plus a few others,
and R random strings (fixed seed); each row gives re.match's length in UTF-8
bytes (-1: no match).  Then every code point (surrogates excluded) against
\\w, \\d and \\s.

usage: terminal_strings_oracle.py L R
Output rows: "T\\t<pattern>\\t<text>\\t<len>" and "C\\t<hex code point>\\t<w><d><s>";
pattern and text escaped as in regex_oracle.py.
"""
import itertools
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import regex_oracle  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXTRA = ["a", "Z", "0", "9", "_", " ", "\n", "\t", '"', "'", "\\", "é", "€", "#", ".", ";"]


def project_terminals():
    from lark import Lark
    pats = []
    d = os.path.join(ROOT, "grammar", "lark")
    for name in sorted(os.listdir(d)):
        # common.lark has terminals only, Lark's own (covered above).
        if name.endswith(".lark") and name != "common.lark":
            path = os.path.join(d, name)
            # A grammar names its start rules on its first line as
            # "// start: a b" (as tests/lark_reader_test.cc reads them).
            with open(path, encoding="utf-8") as f:
                first = f.readline()
            start = first[len("// start:"):].split() if first.startswith("// start:") else []
            g = Lark.open(path, parser="lalr", lexer="contextual", start=start or ["start"])
            pats += [t.pattern.to_regexp() for t in g.terminals]
    return pats


def alphabet(pattern):
    chars = [c for c in pattern if c.isprintable() and c not in "()[]{}?*+|^:!<=$"]
    return list(dict.fromkeys(chars + EXTRA))[:12]


def main():
    max_len, randoms = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(4242)
    out = sys.stdout
    pats = list(dict.fromkeys(regex_oracle.lark_terminals() + project_terminals()))
    for p in pats:
        rx = re.compile(p)
        alpha = alphabet(p)
        texts = [""]
        for n in range(1, max_len + 1):
            texts += ["".join(t) for t in itertools.product(alpha, repeat=n)]
        for _ in range(randoms):
            texts.append("".join(rng.choice(alpha) for _ in range(rng.randint(1, 12))))
        ep = regex_oracle.escape(p)
        for t in texts:
            m = rx.match(t)
            n = -1 if m is None else len(t[:m.end()].encode("utf-8"))
            out.write("T\t%s\t%s\t%d\n" % (ep, regex_oracle.escape(t), n))
    w, d, s = re.compile(r"\w"), re.compile(r"\d"), re.compile(r"\s")
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        out.write("C\t%x\t%d%d%d\n" % (cp, bool(w.match(ch)), bool(d.match(ch)), bool(s.match(ch))))


if __name__ == "__main__":
    main()
