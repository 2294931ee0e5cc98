#!/usr/bin/env python3
"""Rewrite a Lark grammar into the Lark subset that llguidance accepts.

llguidance reads Lark syntax but (version 1.9) refuses terminal priorities
(``NAME.2``) and rule templates (``rule{param}``), and its lexer is a DFA:
look-arounds and anchors have no meaning there.  This script loads the grammar
with Lark itself (``parser='lalr', lexer='contextual'``), which expands
templates, ``?``/``*``/``+``/``[]`` and imports, and writes back

* every rule in BNF (``r_<name>: alt | alt``; an empty alternative becomes an
  optional group),
* every string terminal as a string (``T_<name>: "..."`` or ``"..."i``), every
  other terminal as one regular expression (``T_<name>: /.../``) re-emitted
  from Python's ``re`` parse tree, with look-arounds and anchors dropped,
  lazy quantifiers made greedy, ``i`` kept as the regex flag,
* ``%ignore`` for the ignored terminals.

Terminals with no pattern (``%declare _INDENT _DEDENT``, produced by Lark's
PythonIndenter) are removed from every alternative: llguidance then cannot
enforce indentation, and a newline inside brackets (which the indenter
drops) is still a ``_NEWLINE`` token for it.  Everything else is Lark's
grammar; the dropped look-aheads make the language larger, never smaller.

Usage: lark_to_llguidance.py GRAMMAR.lark OUT.lark [--start RULE]
       lark_to_llguidance.py --python-lark OUT.lark   (lark's python.lark, file_input)
"""
from __future__ import annotations

import argparse
import json
import re
import sys

try:
    from re import _parser as sre_parse
    from re import _constants as sre_c
except ImportError:  # pragma: no cover
    import sre_parse
    import sre_constants as sre_c

_META = set(".^$*+?{}[]\\|()/")


def _lit(cp, in_class=False):
    ch = chr(cp)
    if cp < 0x20 or cp == 0x7F:
        return "\\x%02x" % cp
    if cp > 0xFFFF:
        return "\\U%08x" % cp if False else "\\x{%x}" % cp
    if in_class and ch in "\\]^-[/":
        return "\\" + ch
    if not in_class and ch in _META:
        return "\\" + ch
    return ch


_CATS = {"CATEGORY_DIGIT": "\\d", "CATEGORY_NOT_DIGIT": "\\D", "CATEGORY_SPACE": "\\s",
         "CATEGORY_NOT_SPACE": "\\S", "CATEGORY_WORD": "\\w", "CATEGORY_NOT_WORD": "\\W"}


def _seq(items, notes):
    return "".join(_node(op, av, notes) for op, av in items)


def _node(op, av, notes):
    C = sre_c
    if op is C.LITERAL:
        return _lit(av)
    if op is C.NOT_LITERAL:
        return "[^" + _lit(av, True) + "]"
    if op is C.ANY:
        return "."
    if op is C.IN:
        body, neg = "", False
        for o, a in av:
            if o is C.NEGATE:
                neg = True
            elif o is C.LITERAL:
                body += _lit(a, True)
            elif o is C.RANGE:
                body += _lit(a[0], True) + "-" + _lit(a[1], True)
            elif o is C.CATEGORY:
                body += _CATS[str(a)]
            else:
                raise ValueError(f"class item {o}")
        return "[" + ("^" if neg else "") + body + "]"
    if op is C.BRANCH:
        return "(?:" + "|".join(_seq(b, notes) for b in av[1]) + ")"
    if op is C.SUBPATTERN:
        _, add, dele, sub = av
        flag = "i" if add & re.IGNORECASE else ""
        if dele & re.IGNORECASE:
            flag += "-i"
        return "(?" + flag + ":" + _seq(sub, notes) + ")"
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
        if op is C.MIN_REPEAT:
            notes.add("lazy quantifier made greedy")
        lo, hi, sub = av
        inner = "(?:" + _seq(sub, notes) + ")"
        if hi is C.MAXREPEAT:
            return inner + ("*" if lo == 0 else "+" if lo == 1 else "{%d,}" % lo)
        if lo == 0 and hi == 1:
            return inner + "?"
        return inner + ("{%d}" % lo if lo == hi else "{%d,%d}" % (lo, hi))
    if op in (C.ASSERT, C.ASSERT_NOT):
        notes.add("look-around dropped")
        return ""
    if op is C.AT:
        notes.add("anchor dropped")
        return ""
    if op is C.CATEGORY:
        return _CATS[str(av)]
    raise ValueError(f"regex operator {op}")


def terminal_regex(pattern):
    notes = set()
    flags = set(pattern.flags)
    if type(pattern).__name__ == "PatternStr":  # stays a string: keywords win over regexes
        return json.dumps(pattern.value) + ("i" if "i" in flags else ""), notes
    else:
        tree = sre_parse.parse(pattern.value, re.IGNORECASE if "i" in flags else 0)
        body = _seq(list(tree), notes)
    return "/" + body + "/" + ("i" if "i" in flags else ""), notes


# python.lark's string terminals end at the first unescaped quote through a
# lazy quantifier and a look-behind; a DFA needs that written out.  Applied
# only to terminals of these names whose pattern has that form.
_PY_PREFIX = r"(?:[ubf]?r?|r[ubf])"
_ANY_ESC = r"\\[\s\S]"
OVERRIDES = {
    # "..." or '...': no newline; a backslash escapes the next character
    "STRING": "/" + _PY_PREFIX + r"""(?:"(?:[^"\\\n]|\\[^\n])*"|'(?:[^'\\\n]|\\[^\n])*')/i""",
    # triple-quoted: any text without an unescaped run of three quotes
    "LONG_STRING": "/" + _PY_PREFIX + "(?:" + "|".join(
        q * 3 + "(?:" + "|".join(f"{q * k}(?:[^{q}\\\\]|{_ANY_ESC})" for k in range(3)) + ")*"
        + q * 3 for q in "\"'") + ")/i",
}


def _n(s):
    return re.sub(r"[^A-Za-z0-9_]", "_", s)


def translate(parser, start):
    known = {t.name for t in parser.terminals}
    declared = {s.name for r in parser.rules for s in r.expansion
                if s.is_term and s.name not in known}
    lines, approx = [f"start: r_{_n(start)}"], {}
    by_origin = {}
    for r in parser.rules:
        syms = []
        for s in r.expansion:
            if s.is_term:
                if s.name in declared:
                    continue  # _INDENT/_DEDENT: no pattern
                syms.append("T_" + _n(s.name).lstrip("_"))
            else:
                syms.append("r_" + _n(s.name))
        by_origin.setdefault(r.origin.name, []).append(" ".join(syms))
    for origin, alts in by_origin.items():
        nonempty = list(dict.fromkeys(a for a in alts if a))
        body = " | ".join(nonempty)
        if len(nonempty) < len(alts) and nonempty:
            body = "(" + body + ")?"
        lines.append(f"r_{_n(origin)}: {body}" if body else f'r_{_n(origin)}: ""')
    for t in parser.terminals:
        if t.name in declared:
            continue
        if t.name in OVERRIDES and "(?<!" in t.pattern.value and ".*?" in t.pattern.value:
            rx, notes = OVERRIDES[t.name], {"lazy match + look-behind written as a DFA"}
        else:
            rx, notes = terminal_regex(t.pattern)
        if notes:
            approx[t.name] = sorted(notes)
        lines.append(f"T_{_n(t.name).lstrip('_')}: {rx}")
    for name in parser.ignore_tokens:
        lines.append(f"%ignore T_{_n(name).lstrip('_')}")
    return "\n".join(lines) + "\n", approx, sorted(declared)


def main(argv=None):
    import lark
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("grammar", nargs="?")
    ap.add_argument("out")
    ap.add_argument("--start", default="start")
    ap.add_argument("--python-lark", action="store_true")
    a = ap.parse_args(argv)
    if a.python_lark:
        from lark.indenter import PythonIndenter
        parser = lark.Lark.open_from_package("lark", "python.lark", ["grammars"], parser="lalr",
                                             postlex=PythonIndenter(), start="file_input")
        start, src = "file_input", "lark's python.lark"
    else:
        with open(a.grammar, encoding="utf-8") as f:
            parser = lark.Lark(f.read(), parser="lalr", lexer="contextual", start=a.start)
        start, src = a.start, a.grammar.split("/")[-1]
    text, approx, dropped = translate(parser, start)
    head = [f"// Generated by tests/bench/peers/lark_to_llguidance.py from {src} (start: {start}).",
            "// Terminals dropped (no pattern): " + (", ".join(dropped) or "none"),
            "// Terminals over-approximated:"]
    head += [f"//   {k}: {', '.join(v)}" for k, v in sorted(approx.items())] or ["//   none"]
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(head) + "\n" + text)
    print(f"{a.out}: {len(approx)} terminals approximated, dropped {dropped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
