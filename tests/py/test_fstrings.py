"""f-strings in the strict Python grammar (grammar/lark/python.lark) against
CPython 3.11: a table of constructs, each with CPython's verdict, the
grammar's, and the CPython 3.11 lexical limit that refuses it where the grammar
alone does not; and the lexer modes of the grammar.

The table records CPython 3.11's own rules for replacement fields (measured
with compile()): a field's text is read in parentheses as star_expressions
(so `{a, b}`, `{*a,}`, `{yield x}` and `{x for x in y}` stand alone, a bare
`{*a}` does not); no backslash anywhere in a field's expression (nested
strings included), no `#`, no newline in a single-quoted f-string; a nested
string may use the enclosing quote character only in a triple-quoted
f-string and never its three quotes; a top-level `:` starts the format spec
(so `{x:=1}` is a spec, `{lambda: 1}` is refused), `!=`, `==`, `<=`, `>=`
stay operators, `=` before `!`, `:` or `}` is self-documentation, a
conversion is `!r`, `!s` or `!a` followed at once by `:` or `}`; a format
spec may hold fields whose own spec is literal text only ("expressions
nested too deeply"); `{{`/`}}` are braces in the literal text.

The grammar reads the field with the parser.  The lexical limits (backslash,
`#`, newline, the enclosing quote, `\\N{...}` names) are not the grammar's:
a row the grammar accepts and CPython refuses must name its limit, and no
other row may be accepted against CPython.

Checked here, with Lark (parser='lalr', lexer='contextual', PythonIndenter):
  * each row's CPython verdict is what compile() says (a SyntaxWarning
    counts as an error; an invalid escape's DeprecationWarning does not: the
    grammar keeps the backslash and its character as text, and a backslash
    before a brace as text before the field, `f"\\{6}"`, as CPython 3.11
    does);
  * each row's grammar verdict is what Lark says;
  * the rows CPython compiles and the grammar refuses are printed (a newline
    in a triple-quoted f-string's field outside brackets);
  * the lexer modes (tests/py/fstring_modes.py): one code mode and, per
    f-string kind, a text mode and a spec mode of three terminals each; no
    parser state's scanner holds two terminals of the same text.
"""
from __future__ import annotations

import warnings

import pytest

import fstring_modes
from test_python_strict import lark_ok, lark_parser


# (text, CPython 3.11 compiles it (no warning), the strict grammar accepts it,
#  the CPython 3.11 lexical limit refusing it where the grammar accepts it)
ROWS = [
("def g():\n    return f'{x:{y:{z}}}'\n", False, False, ''),
("def g():\n    return f'{x:{y:>{z}}}'\n", False, False, ''),
("def g():\n    return f'{x:{y:>10}}'\n", True, True, ''),
("def g():\n    return f'{x:{y!r}}'\n", True, True, ''),
("def g():\n    return f'{x:{y=}}'\n", True, True, ''),
("def g():\n    return f'{x:\\n}'\n", True, True, ''),
("def g():\n    return f'{x:\\\\}'\n", True, True, ''),
("def g():\n    return f'{x:{{}}}'\n", True, True, ''),
("def g():\n    return f'{x:}}'\n", False, False, ''),
("def g():\n    return f'{x:{{}'\n", False, False, ''),
('def g():\n    return f\'{"#"}\'\n', True, True, ''),
("def g():\n    return f'{x#}'\n", False, False, ''),
('def g():\n    return f\'{"\\n"}\'\n', False, True, 'backslash in a field'),
("def g():\n    return f'''{'a'}'''\n", True, True, ''),
('def g():\n    return f\'\'\'{"a"}\'\'\'\n', True, True, ''),
("def g():\n    return f'''{'''a'''}'''\n", False, True, 'the enclosing quote in a field'),
("def g():\n    return f'''{x\n", False, False, ''),
("def g():\n    return f'{yield}'\n", True, True, ''),
("def g():\n    return f'{x:=1}'\n", True, True, ''),
("def g():\n    return f'{(x:=1)}'\n", True, True, ''),
("def g():\n    return f'{lambda: 1}'\n", False, False, ''),
("def g():\n    return f'{(lambda: 1)}'\n", True, True, ''),
("def g():\n    return f'{*a}'\n", False, False, ''),
("def g():\n    return f'{*a,}'\n", True, True, ''),
("def g():\n    return f'{a, b}'\n", True, True, ''),
("def g():\n    return f'{x!r }'\n", False, False, ''),
("def g():\n    return f'{x! r}'\n", False, False, ''),
("def g():\n    return f'{x !r}'\n", True, True, ''),
("def g():\n    return f'{x = }'\n", True, True, ''),
("def g():\n    return f'{x=!r:>10}'\n", True, True, ''),
("def g():\n    return f'{x!=y}'\n", True, True, ''),
("def g():\n    return f'{x==y=}'\n", True, True, ''),
("def g():\n    return f'{ {1:2} }'\n", True, True, ''),
("def g():\n    return f'{x[1:2]}'\n", True, True, ''),
('def g():\n    return f\'{f"{x}"}\'\n', True, True, ''),
('def g():\n    return f"{f\'{x}\'}"\n', True, True, ''),
('def g():\n    return f\'{f"{f\'\'\'{x}\'\'\'}"}\'\n', False, True, 'the enclosing quote in a field'),
('def g():\n    return f\'{"it\\\'s"}\'\n', False, True, 'backslash in a field'),
('def g():\n    return f\'{x:{"a"}}\'\n', True, True, ''),
('def g():\n    return f"{x:\'}"\n', True, True, ''),
("def g():\n    return f'{x\\\n", False, False, ''),
("def g():\n    return f'{  }'\n", False, False, ''),
("def g():\n    return f'{x!}'\n", False, False, ''),
("def g():\n    return f'{x:{y:{{}}}}'\n", False, False, ''),
("def g():\n    return f'{x:{y:a}}'\n", True, True, ''),
("async def g():\n    return f'{await x}'\n", True, True, ''),
("def g():\n    return f'{x:{y}{z}}'\n", True, True, ''),
("def g():\n    return rf'\\{x}'\n", True, True, ''),
("def g():\n    return rf'\\{{x}}'\n", True, True, ''),
("def g():\n    return f'\\{x}'\n", True, True, ''),
("def g():\n    return f'{x!r=}'\n", False, False, ''),
("def g():\n    return f'{x=!r}'\n", True, True, ''),
("def g():\n    return f'{x if y else z}'\n", True, True, ''),
("def g():\n    return f'{x:>{w}.{p}}'\n", True, True, ''),
('def g():\n    return f\'{x}\' \'a\' f"{y}"\n', True, True, ''),
("def g():\n    return f'''{x:\n", False, False, ''),
("def g():\n    return f'''{x:\\n}'''\n", True, True, ''),
("def g():\n    return f'{x:\\N{DASH}}'\n", False, True, 'not a character name'),
("def g():\n    return f'\\N{EM DASH}{x}'\n", True, True, ''),
("def g():\n    return f'{x:{y}=}'\n", True, True, ''),
("def g():\n    return f'{x:#x}'\n", True, True, ''),
("def g():\n    return f'{x:#{y}}'\n", True, True, ''),
("def g():\n    return f'{x:!r}'\n", True, True, ''),
("def g():\n    return f'{yield x}'\n", True, True, ''),
("def g():\n    return f'{(yield)}'\n", True, True, ''),
("def g():\n    return f'{x\\t}'\n", False, False, ''),
("def g():\n    return f'{\\tx}'\n", False, False, ''),
("def g():\n    return f'{x:\\t}'\n", True, True, ''),
('def g():\n    return f\'\'\'{"""a"""}\'\'\'\n', True, True, ''),
('def g():\n    return f\'\'\'{"a\'b"}\'\'\'\n', True, True, ''),
('def g():\n    return f\'\'\'{"a\'\'b"}\'\'\'\n', True, True, ''),
("def g():\n    return f'''{x+''}'''\n", True, True, ''),
("def g():\n    return f'{x:{y:{z}}}'\n", False, False, ''),
("def g():\n    return f'{x,}'\n", True, True, ''),
("def g():\n    return f'{x=   }'\n", True, True, ''),
("def g():\n    return f'{x =:>3}'\n", True, True, ''),
("def g():\n    return f'{x!a:{y}}'\n", True, True, ''),
("def g():\n    return f'}}{{'\n", True, True, ''),
("def g():\n    return f'{}'\n", False, False, ''),
("def g():\n    return f'{x}}'\n", False, False, ''),
("def g():\n    return f'{{{x}}}'\n", True, True, ''),
("def g():\n    return f'{x:{y!r:>3}}'\n", True, True, ''),
("def g():\n    return f'''{x\n}'''\n", True, False, ''),
("def g():\n    return f'''{x:\n}'''\n", True, True, ''),
("def g():\n    return f'''{\n  x +\n  y}'''\n", True, False, ''),
("def g():\n    return f'{x:{y}}'\n", True, True, ''),
('x = f\'{type_ref}[{",".join(arg_refs)}]\'\n', True, True, ''),
('x = f\'{choice["type"]!r}\'\n', True, True, ''),
("x = f'{m.group(1)}_{m.group(2)}'\n", True, True, ''),
("x = f'{round(x, 2)})'\n", True, True, ''),
('x = f"c{i + 1}"\n', True, True, ''),
("x = f'{[y for y in z if y]}'\n", True, True, ''),
("x = f'{ {k: v for k, v in d.items()} }'\n", True, True, ''),
("x = f'{x[1:2:3]}'\n", True, True, ''),
("x = f'{a if b else c!r:>{w}}'\n", True, True, ''),
('x = FR\'\\d{x}\' Rf"{y}" rF\'\'\'{z}\'\'\'\n', True, True, ''),
("x = (f'a\nb')\n", False, True, 'newline in a single-quoted f-string'),
("x = (f'{a\n}')\n", False, True, 'newline in a single-quoted f-string'),
("x = f'#{x}'  # c\n", True, True, ''),
("x = f'{x:%Y-%m-%d %H:%M}'\n", True, True, ''),
('x = f\'{"a" "b"}\'\n', True, True, ''),
("x = f'{-x ** 2 // 3 @ m}'\n", True, True, ''),
("x = f'{not a or b and c is not d}'\n", True, True, ''),
("x = f'{x!r:{w}.{p}f}'\n", True, True, ''),
("x = f'{f(*a, **k)}'\n", True, True, ''),
('x = f\'{b"x"}\'\n', True, True, ''),
("x = f'{...}'\n", True, True, ''),
("x = f'{x for x in y}'\n", True, True, ''),
("x = f'{x:=}'\n", True, True, ''),
("x = f'{(x := 1) + 1}'\n", True, True, ''),
('x = f\'{a}\' "b" f\'{c}\' b\'d\'\n', False, False, ''),
("x = f'''a\nb{x}\n'''\n", True, True, ''),
('x = f"{x[\'a\']}" + f\'{y["b"]}\'\n', True, True, ''),
("x = f'{x.__class__.__name__!s}'\n", True, True, ''),
# Escapes in the text and the spec: the grammar takes a backslash and one
# character (or a brace after it), the scope layer counts hex digits.
("x = f'\\x41\\u00e9{x:\\x3e\\U0000003e}\\U0010ffff'\n", True, True, ''),
("x = f'\\x4{x}'\n", False, True, 'a truncated hex escape'),
("x = f'{x:\\x4}'\n", False, True, 'a truncated hex escape'),
("x = f'\\u00e{x}'\n", False, True, 'a truncated hex escape'),
("x = f'\\U00110000{x}'\n", False, True, 'a \\U escape past U+10FFFF'),
("x = rf'\\x4{x}' + Rf'{x:\\u}'\n", True, True, ''),
("x = f'\\777{x:\\0}'\n", True, True, ''),
("x = f'\\}}{x}\\{{'\n", True, True, ''),
("x = f'\\}'\n", False, False, ''),
("x = f'\\{'\n", False, False, ''),
("x = f'{x:\\{y}}' + f'{x:\\}'\n", True, True, ''),
("x = f'\\N{EM DASH}\\{x}'\n", True, True, ''),
("x = f'\\q{x:\\q}'\n", True, True, ''),
# Line ends are text in every kind (the layer refuses them in a
# single-quoted f-string); a raw carriage return in a triple-quoted one.
("x = f'a\nb'\n", False, True, 'newline in a single-quoted f-string'),
("x = f'{x:\n}'\n", False, True, 'newline in a single-quoted f-string'),
("x = f'a\rb'\n", False, True, 'newline in a single-quoted f-string'),
("x = f'''a\rb{x:\r}'''\n", True, True, ''),
]


def cpython_ok(text):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.simplefilter("ignore", DeprecationWarning)
            compile(text, "<text>", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, SyntaxWarning, DeprecationWarning):
        return False


@pytest.fixture(scope="module")
def parser():
    return lark_parser()


def test_cpython_verdicts():
    """The table's CPython column is CPython's (so the rules above hold)."""
    wrong = [(t, c) for t, c, _, _ in ROWS if cpython_ok(t) != c]
    assert not wrong, wrong


def test_grammar_verdicts(parser):
    wrong, refused, over = [], [], []
    for text, cpy, expected, limit in ROWS:
        got = lark_ok(parser, text)
        if got and not cpy and not limit:
            over.append(text)
        if got != expected:
            wrong.append((text, got))
        if cpy and not got:
            refused.append(text.split("return ", 1)[-1].strip())
    print(f"\n{len(ROWS)} f-string rows: CPython compiles {sum(r[1] for r in ROWS)}, "
          f"the grammar accepts {sum(r[2] for r in ROWS)}, of which "
          f"{sum(1 for r in ROWS if r[3])} only the lexical limits refuse; "
          f"still refused ({len(refused)}):\n  " + "\n  ".join(refused))
    assert not over, ("accepted, CPython rejects, no lexical limit named", over)
    assert not wrong, wrong
    for _, cpy, expected, limit in ROWS:
        assert not limit or (expected and not cpy)


def test_lexer_modes(parser):
    """One code mode, and per f-string kind a text mode (FMID, FOPEN, FEND) and
    a spec mode (FSPEC, FSOPEN, FSCLOSE) of their own, beside the match
    block's CASE (only case lines scan it); a grammar edit that lets a kind's
    piece share a parser state with code or with another kind merges modes and
    fails here."""
    ms = fstring_modes.modes(parser)
    small = sorted(sorted(g) for g in ms[1:])
    want = sorted([["CASE"]] + [sorted(p) for k in fstring_modes.KINDS
                                for p in fstring_modes.kind_pieces(k)])
    assert small == want, small
    assert "NAME" in ms[0] and "FCLOSE" in ms[0] and "FCOLON" in ms[0]
    print(f"\n{len(ms)} modes: code {len(ms[0])} terminals, "
          f"{len(ms) - 2} f-string modes of 3 and CASE's")
    assert fstring_modes.clashes(parser) == []


MERGED = r"""
start: atom+
atom: NAME | "{" NAME "}" | FSTART (MID | "{" NAME "}")* FEND
FSTART: /f'/
MID.5: /[^'{}]+/
FEND: /'/
NAME: /[a-z]+/
%ignore " "
"""

CLASH = r"""
start: atom+
atom: x | "{" x "}" | FOPEN x FCLOSE
x: NAME
FOPEN: /f\{/
FCLOSE: /\}/
NAME: /[a-z]+/
%ignore " "
"""


def test_mode_checker_sees_merges():
    """The checker itself: a field opened by the code's `{` puts the text
    pieces in the code's mode; an FCLOSE regexp beside the code's `}` in one
    state (after a shared rule) is a clash."""
    from lark import Lark
    ms = fstring_modes.modes(Lark(MERGED, parser="lalr", lexer="contextual"))
    assert {"MID", "FEND", "NAME", "LBRACE"} <= ms[0], ms
    clashes = fstring_modes.clashes(Lark(CLASH, parser="lalr", lexer="contextual"))
    assert any(set(n) == {"FCLOSE", "RBRACE"} for _, n in clashes), clashes
