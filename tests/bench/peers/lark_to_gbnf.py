#!/usr/bin/env python3
"""Translate a Lark grammar into XGrammar's EBNF (GBNF dialect) for the benchmark.

The grammar is loaded by Lark itself (``parser='lalr', lexer='contextual'``),
so its rules arrive already in BNF (Lark's expansion of ``?``, ``*``, ``+``,
``[]``, templates and ``%import``) and its terminals as Python ``re``
patterns.  Each rule becomes one GBNF rule with the same alternatives; each
terminal becomes a rule ``T ::= <pattern>`` translated from the ``re`` parse
tree (``re._parser``); ``%ignore`` becomes ``ig ::= (I1 | I2 ...)*`` placed
after every terminal reference and at the start of ``root``, which is Lark's
"between any two terminals" rule.

XGrammar parses characters, not terminals, so some of Lark's semantics cannot
be written down; the translation then accepts a superset and says so in the
header of the output and in ``approximations``:

* look-aheads (``(?=``, ``(?!``) and anchors (``\\Z``, ``^``, ``$``) are dropped,
* lazy quantifiers become greedy ones (same set of strings),
* terminal priorities and the contextual lexer's maximal munch are not
  expressible (e.g. ``selectx`` may split as SELECT + NAME),
* ``\\w`` and ``\\s`` are Unicode classes in Python; ``\\w`` is written as
  ASCII word characters plus every non-ASCII code point.

Usage: lark_to_gbnf.py GRAMMAR.lark OUT.gbnf [--start RULE]
"""
from __future__ import annotations

import argparse
import re
import sys

try:
    from re import _parser as sre_parse  # Python 3.11+
    from re import _constants as sre_c
except ImportError:  # pragma: no cover
    import sre_parse
    import sre_constants as sre_c


class Unsupported(Exception):
    pass


def _char(cp: int) -> str:
    """One code point inside a GBNF character class."""
    if cp in (ord("\\"), ord("]"), ord("["), ord("-"), ord("^")):
        return "\\" + chr(cp)
    if cp < 0x20 or cp == 0x7F:
        return "\\x%02x" % cp
    if 0xD800 <= cp <= 0xDFFF or cp > 0xFFFF:
        return "\\U%08x" % cp if cp > 0xFFFF else "\\u%04x" % cp
    return chr(cp)


def _string(s: str) -> str:
    out = []
    for ch in s:
        cp = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif cp < 0x20 or cp == 0x7F:
            out.append("\\x%02x" % cp)
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_WORD_RANGES = [(ord("0"), ord("9")), (ord("A"), ord("Z")), (ord("_"), ord("_")),
                (ord("a"), ord("z")), (0x80, 0x10FFFF)]
_DIGIT_RANGES = [(ord("0"), ord("9"))]
_SPACE_RANGES = [(0x09, 0x0D), (0x1C, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
                 (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
                 (0x3000, 0x3000)]


def _complement(ranges):
    out, lo = [], 0
    for a, b in sorted(ranges):
        if a > lo:
            out.append((lo, a - 1))
        lo = max(lo, b + 1)
    if lo <= 0x10FFFF:
        out.append((lo, 0x10FFFF))
    return out


def _category(cat, notes):
    C = sre_c
    table = {C.CATEGORY_DIGIT: _DIGIT_RANGES, C.CATEGORY_SPACE: _SPACE_RANGES,
             C.CATEGORY_WORD: _WORD_RANGES}
    neg = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE,
           C.CATEGORY_NOT_WORD: C.CATEGORY_WORD}
    if cat in table:
        if cat == C.CATEGORY_WORD:
            notes.add("\\w widened to every non-ASCII code point")
        return table[cat]
    if cat in neg:
        if neg[cat] == C.CATEGORY_WORD:
            notes.add("\\W narrowed to ASCII")
        return _complement(table[neg[cat]])
    raise Unsupported(f"category {cat}")


def _fold(ranges, icase):
    if not icase:
        return ranges
    out = list(ranges)
    for a, b in ranges:
        for lo, hi, delta in ((ord("a"), ord("z"), -32), (ord("A"), ord("Z"), 32)):
            x, y = max(a, lo), min(b, hi)
            if x <= y:
                out.append((x + delta, y + delta))
    return out


def _class(ranges, negate=False) -> str:
    merged = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    body = "".join(_char(a) if a == b else _char(a) + "-" + _char(b) for a, b in merged)
    return "[" + ("^" if negate else "") + body + "]"


def _in_ranges(items, icase, notes):
    ranges, negate = [], False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            ranges.append((av, av))
        elif op is sre_c.RANGE:
            ranges.append(av)
        elif op is sre_c.CATEGORY:
            ranges.extend(_category(av, notes))
        else:
            raise Unsupported(f"class item {op}")
    return _fold(ranges, icase), negate


def _seq(items, icase, notes) -> str:
    parts = []
    for op, av in items:
        p = _node(op, av, icase, notes)
        if p:
            parts.append(p)
    return " ".join(parts) if parts else '""'


def _node(op, av, icase, notes) -> str:
    C = sre_c
    if op is C.LITERAL:
        if icase and chr(av).isascii() and chr(av).isalpha():
            return _class(_fold([(av, av)], True))
        return _string(chr(av))
    if op is C.NOT_LITERAL:
        return _class(_fold([(av, av)], icase), negate=True)
    if op is C.ANY:
        return "[^\\n]"
    if op is C.IN:
        ranges, neg = _in_ranges(av, icase, notes)
        return _class(ranges, neg)
    if op is C.BRANCH:
        return "(" + " | ".join(_seq(b, icase, notes) for b in av[1]) + ")"
    if op is C.SUBPATTERN:
        group, add_flags, del_flags, sub = av
        ic = (icase or bool(add_flags & re.IGNORECASE)) and not (del_flags & re.IGNORECASE)
        return "(" + _seq(sub, ic, notes) + ")"
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
        if op is C.MIN_REPEAT:
            notes.add("lazy quantifiers made greedy (same strings)")
        lo, hi, sub = av
        inner = "(" + _seq(sub, icase, notes) + ")"
        if hi is C.MAXREPEAT:
            if lo == 0:
                return inner + "*"
            if lo == 1:
                return inner + "+"
            return inner + "{%d,}" % lo
        if lo == 0 and hi == 1:
            return inner + "?"
        if lo == hi:
            return inner + "{%d}" % lo
        return inner + "{%d,%d}" % (lo, hi)
    if op in (C.ASSERT, C.ASSERT_NOT):
        notes.add("look-arounds dropped")
        return ""
    if op is C.AT:
        notes.add("anchors dropped")
        return ""
    raise Unsupported(f"regex operator {op}")


def pattern_to_gbnf(pattern) -> tuple[str, set]:
    notes = set()
    flags = set(pattern.flags)
    icase = "i" in flags
    if type(pattern).__name__ == "PatternStr":
        if icase:
            return " ".join(_node(sre_c.LITERAL, ord(c), True, notes) for c in pattern.value), notes
        return _string(pattern.value), notes
    for f in flags - {"i"}:
        notes.add(f"flag {f} ignored")
    tree = sre_parse.parse(pattern.value, re.IGNORECASE if icase else 0)
    return _seq(list(tree), icase, notes), notes


def _name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", s).replace("__", "_x_")


def translate(lark_text: str, start: str = "start", import_paths=()):
    import lark
    parser = lark.Lark(lark_text, parser="lalr", lexer="contextual", start=start,
                       import_paths=list(import_paths))
    approximations = {}
    out = []
    ignore = list(parser.ignore_tokens)
    ig = "ig" if ignore else None
    out.append("root ::= " + (f"{ig} " if ig else "") + "r_" + _name(start))
    by_origin = {}
    for r in parser.rules:
        by_origin.setdefault(r.origin.name, []).append(r.expansion)
    for origin, alts in by_origin.items():
        bodies = []
        for exp in alts:
            syms = []
            for s in exp:
                if s.is_term:
                    syms.append("t_" + _name(s.name) + (f" {ig}" if ig else ""))
                else:
                    syms.append("r_" + _name(s.name))
            bodies.append(" ".join(syms) if syms else '""')
        out.append(f"r_{_name(origin)} ::= " + " | ".join(bodies))
    for t in parser.terminals:
        body, notes = pattern_to_gbnf(t.pattern)
        if notes:
            approximations[t.name] = sorted(notes)
        out.append(f"t_{_name(t.name)} ::= {body}")
    if ig:
        out.append(f"{ig} ::= (" + " | ".join("t_" + _name(n) for n in ignore) + ")*")
    return "\n".join(out) + "\n", approximations


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("grammar")
    ap.add_argument("out")
    ap.add_argument("--start", default="start")
    a = ap.parse_args(argv)
    with open(a.grammar, encoding="utf-8") as f:
        text = f.read()
    gbnf, approx = translate(text, a.start)
    header = [f"# Generated by tests/bench/peers/lark_to_gbnf.py from {a.grammar.split('/')[-1]}"
              f" (start: {a.start}).",
              "# Terminals whose Lark semantics are over-approximated here:"]
    header += [f"#   {k}: {', '.join(v)}" for k, v in sorted(approx.items())] or ["#   none"]
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(header) + "\n" + gbnf)
    print(f"{a.out}: {gbnf.count(chr(10))} rules, {len(approx)} terminals approximated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
