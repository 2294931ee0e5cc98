"""Lexer modes of a Lark grammar, from Lark's own LALR tables.

Two lexed terminals are in the same mode when some parser state's scanner
(the terminals with an action, shift or reduce, in that state) holds both.
`%ignore`d terminals and the postlexer's always-accepted ones (the indenter's
newline) are in every mode and join nothing; terminals that are never lexed
(`%declare`d, such as _INDENT / _DEDENT) are left out.

The strict Python grammar keeps each f-string kind's text pieces (FMID_k,
FOPEN_k, FEND_k) and spec pieces (FSPEC_k, FSOPEN_k, FSCLOSE_k) out of the code's
mode and apart from the other kinds' (grammar/lark/README.md, "f-strings read
by the parser"); tests/py/test_fstrings.py checks that with `modes()`.

    python tests/py/fstring_modes.py [GRAMMAR]   prints the modes and their sizes
"""
from __future__ import annotations

import sys
from pathlib import Path

GRAMMAR = Path(__file__).resolve().parents[2] / "grammar" / "lark" / "python.lark"

# The f-string kinds of the strict grammar, by terminal suffix.
KINDS = ("SQ", "DQ", "TSQ", "TDQ", "RSQ", "RDQ", "RTSQ", "RTDQ")


def scanners(parser):
    """{state: set of lexed terminal names with an action there}, the mode's
    always-present terminals (ignored and always-accepted) and the lexed set."""
    lexer_conf = parser.lexer_conf
    lexed = {t.name for t in lexer_conf.terminals}
    always = set(lexer_conf.ignore)
    postlex = parser.options.postlex
    if postlex is not None:
        always |= set(postlex.always_accept)
    table = parser.parser.parser.parser.parse_table  # Lark -> frontend -> LALR_Parser -> _Parser
    out = {}
    for state, actions in table.states.items():
        out[state] = {a for a in actions if a in lexed and a not in always}
    return out, always, lexed


def modes(parser):
    """The modes: a list of sets of terminal names, largest first."""
    scan, always, lexed = scanners(parser)
    parent = {t: t for t in lexed if t not in always}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for terms in scan.values():
        terms = sorted(terms)
        for t in terms[1:]:
            a, b = find(terms[0]), find(t)
            if a != b:
                parent[b] = a
    groups = {}
    for t in parent:
        groups.setdefault(find(t), set()).add(t)
    return sorted(groups.values(), key=lambda g: (-len(g), sorted(g)))


def clashes(parser):
    """States whose scanner holds two terminals of the same pattern and
    priority (a string "}" counts as the regexp \\}): Lark's contextual lexer
    would always read the text as one of them there.  A list of (state, names)."""
    import re
    scan, _, _ = scanners(parser)
    key = {}
    for t in parser.lexer_conf.terminals:
        pat = t.pattern
        text = re.escape(pat.value) if pat.type == "str" else pat.value
        key[t.name] = (text, tuple(sorted(pat.flags)), t.priority)
    out = []
    for state, terms in sorted(scan.items()):
        seen = {}
        for t in sorted(terms):
            seen.setdefault(key[t], []).append(t)
        for names in seen.values():
            if len(names) > 1:
                out.append((state, tuple(names)))
    return out


def kind_pieces(kind):
    """The f-string kind's text pieces and spec pieces."""
    return ({f"FMID_{kind}", f"FOPEN_{kind}", f"FEND_{kind}"},
            {f"FSPEC_{kind}", f"FSOPEN_{kind}", f"FSCLOSE_{kind}"})


def following_modes(parser, terminal):
    """The modes that may follow `terminal`: those of the scanners of the states
    that shifting it leads to."""
    scan, _, _ = scanners(parser)
    table = parser.parser.parser.parser.parse_table  # Lark -> frontend -> LALR_Parser -> _Parser
    found = set()
    for actions in table.states.values():
        act = actions.get(terminal)
        if act is not None and act[0].name == "Shift":
            found.add(act[1])
    mode_of = {}
    for i, g in enumerate(modes(parser)):
        for t in g:
            mode_of[t] = i
    return sorted({mode_of[t] for s in found for t in scan[s]})


def lark_parser(path=GRAMMAR):
    from lark import Lark
    from lark.indenter import PythonIndenter
    return Lark(Path(path).read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                postlex=PythonIndenter(), start="file_input")


def main(argv):
    parser = lark_parser(argv[1] if len(argv) > 1 else GRAMMAR)
    ms = modes(parser)
    scan, always, _ = scanners(parser)
    print(f"{len(scan)} parser states; {len(ms)} modes; in every mode: {' '.join(sorted(always))}")
    for i, g in enumerate(ms):
        names = sorted(g)
        shown = " ".join(names) if len(names) <= 8 else f"{' '.join(names[:8])} ..."
        print(f"mode {i}: {len(g)} terminals: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
