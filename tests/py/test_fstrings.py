"""f-strings in the strict Python grammar (grammar/lark/python.lark) against
CPython 3.11: a table of constructs, each with CPython's verdict and the
grammar's.

The table records CPython 3.11's own limits on replacement fields (measured
with compile()): no backslash anywhere in a field's expression (nested
strings included), no `#`, no newline in a single-quoted f-string; a nested
string may use the enclosing quote character only in a triple-quoted
f-string and never its three quotes; a top-level `:` starts the format spec
(so `{x:=1}` is a spec, `{lambda: 1}` is refused), `!=`, `==`, `<=`, `>=`
stay operators, `=` before `!`, `:` or `}` is self-documentation, a
conversion is `!r`, `!s` or `!a` followed at once by `:` or `}`; a format
spec may hold fields whose own spec is literal text only ("expressions
nested too deeply"); `{{`/`}}` are braces in the literal text.

Checked here, with Lark (parser='lalr', lexer='contextual', PythonIndenter):
  * each row's CPython verdict is what compile() says (warnings count as
    errors, as in the grammar: `\\{` and unknown escapes are refused);
  * each row's grammar verdict is what Lark says, and the grammar accepts no
    row CPython rejects;
  * the rows CPython compiles and the grammar refuses are the f-string
    fields the lexer-level design leaves out (grammar/lark/README.md): the
    test prints them and their count, so a grammar that reads fields with the
    parser turns them to accepted here.
"""
from __future__ import annotations

import warnings

import pytest

from test_python_strict import lark_ok, lark_parser


# (text, CPython 3.11 compiles it (no warning), the strict grammar accepts it)
ROWS = [
("def g():\n    return f'{x:{y:{z}}}'\n", False, False),
("def g():\n    return f'{x:{y:>{z}}}'\n", False, False),
("def g():\n    return f'{x:{y:>10}}'\n", True, False),
("def g():\n    return f'{x:{y!r}}'\n", True, False),
("def g():\n    return f'{x:{y=}}'\n", True, False),
("def g():\n    return f'{x:\\n}'\n", True, False),
("def g():\n    return f'{x:\\\\}'\n", True, False),
("def g():\n    return f'{x:{{}}}'\n", True, False),
("def g():\n    return f'{x:}}'\n", False, False),
("def g():\n    return f'{x:{{}'\n", False, False),
('def g():\n    return f\'{"#"}\'\n', True, False),
("def g():\n    return f'{x#}'\n", False, False),
('def g():\n    return f\'{"\\n"}\'\n', False, False),
("def g():\n    return f'''{'a'}'''\n", True, False),
('def g():\n    return f\'\'\'{"a"}\'\'\'\n', True, True),
("def g():\n    return f'''{'''a'''}'''\n", False, False),
("def g():\n    return f'''{x\n", False, False),
("def g():\n    return f'{yield}'\n", True, False),
("def g():\n    return f'{x:=1}'\n", True, True),
("def g():\n    return f'{(x:=1)}'\n", True, False),
("def g():\n    return f'{lambda: 1}'\n", False, False),
("def g():\n    return f'{(lambda: 1)}'\n", True, False),
("def g():\n    return f'{*a}'\n", False, False),
("def g():\n    return f'{*a,}'\n", True, False),
("def g():\n    return f'{a, b}'\n", True, False),
("def g():\n    return f'{x!r }'\n", False, False),
("def g():\n    return f'{x! r}'\n", False, False),
("def g():\n    return f'{x !r}'\n", True, True),
("def g():\n    return f'{x = }'\n", True, True),
("def g():\n    return f'{x=!r:>10}'\n", True, True),
("def g():\n    return f'{x!=y}'\n", True, True),
("def g():\n    return f'{x==y=}'\n", True, True),
("def g():\n    return f'{ {1:2} }'\n", True, False),
("def g():\n    return f'{x[1:2]}'\n", True, True),
('def g():\n    return f\'{f"{x}"}\'\n', True, False),
('def g():\n    return f"{f\'{x}\'}"\n', True, False),
('def g():\n    return f\'{f"{f\'\'\'{x}\'\'\'}"}\'\n', False, False),
('def g():\n    return f\'{"it\\\'s"}\'\n', False, False),
('def g():\n    return f\'{x:{"a"}}\'\n', True, False),
('def g():\n    return f"{x:\'}"\n', True, False),
("def g():\n    return f'{x\\\n", False, False),
("def g():\n    return f'{  }'\n", False, False),
("def g():\n    return f'{x!}'\n", False, False),
("def g():\n    return f'{x:{y:{{}}}}'\n", False, False),
("def g():\n    return f'{x:{y:a}}'\n", True, False),
("async def g():\n    return f'{await x}'\n", True, False),
("def g():\n    return f'{x:{y}{z}}'\n", True, False),
("def g():\n    return rf'\\{x}'\n", True, True),
("def g():\n    return rf'\\{{x}}'\n", True, True),
("def g():\n    return f'\\{x}'\n", False, False),
("def g():\n    return f'{x!r=}'\n", False, False),
("def g():\n    return f'{x=!r}'\n", True, True),
("def g():\n    return f'{x if y else z}'\n", True, False),
("def g():\n    return f'{x:>{w}.{p}}'\n", True, False),
('def g():\n    return f\'{x}\' \'a\' f"{y}"\n', True, True),
("def g():\n    return f'''{x:\n", False, False),
("def g():\n    return f'''{x:\\n}'''\n", True, False),
("def g():\n    return f'{x:\\N{DASH}}'\n", False, False),
("def g():\n    return f'\\N{EM DASH}{x}'\n", True, True),
("def g():\n    return f'{x:{y}=}'\n", True, False),
("def g():\n    return f'{x:#x}'\n", True, True),
("def g():\n    return f'{x:#{y}}'\n", True, False),
("def g():\n    return f'{x:!r}'\n", True, True),
("def g():\n    return f'{yield x}'\n", True, False),
("def g():\n    return f'{(yield)}'\n", True, False),
("def g():\n    return f'{x\\t}'\n", False, False),
("def g():\n    return f'{\\tx}'\n", False, False),
("def g():\n    return f'{x:\\t}'\n", True, False),
('def g():\n    return f\'\'\'{"""a"""}\'\'\'\n', True, False),
('def g():\n    return f\'\'\'{"a\'b"}\'\'\'\n', True, False),
('def g():\n    return f\'\'\'{"a\'\'b"}\'\'\'\n', True, False),
("def g():\n    return f'''{x+''}'''\n", True, False),
("def g():\n    return f'{x:{y:{z}}}'\n", False, False),
("def g():\n    return f'{x,}'\n", True, False),
("def g():\n    return f'{x=   }'\n", True, False),
("def g():\n    return f'{x =:>3}'\n", True, True),
("def g():\n    return f'{x!a:{y}}'\n", True, False),
("def g():\n    return f'}}{{'\n", True, True),
("def g():\n    return f'{}'\n", False, False),
("def g():\n    return f'{x}}'\n", False, False),
("def g():\n    return f'{{{x}}}'\n", True, True),
("def g():\n    return f'{x:{y!r:>3}}'\n", True, False),
("def g():\n    return f'''{x\n}'''\n", True, False),
("def g():\n    return f'''{x:\n}'''\n", True, False),
("def g():\n    return f'''{\n  x +\n  y}'''\n", True, False),
("def g():\n    return f'{x:{y}}'\n", True, False),
]


def cpython_ok(text):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(text, "<text>", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, SyntaxWarning, DeprecationWarning):
        return False


@pytest.fixture(scope="module")
def parser():
    return lark_parser()


def test_cpython_verdicts():
    """The table's CPython column is CPython's (so the rules above hold)."""
    wrong = [(t, c) for t, c, _ in ROWS if cpython_ok(t) != c]
    assert not wrong, wrong


def test_grammar_verdicts(parser):
    wrong, refused = [], []
    for text, cpy, expected in ROWS:
        got = lark_ok(parser, text)
        assert not (got and not cpy), ("accepted, CPython rejects", text)
        if got != expected:
            wrong.append((text, got))
        if cpy and not got:
            refused.append(text.split("return ", 1)[-1].strip())
    print(f"\n{len(ROWS)} f-string rows: CPython compiles {sum(c for _, c, _ in ROWS)}, "
          f"the grammar accepts {sum(g for _, _, g in ROWS)}; still refused "
          f"({len(refused)}):\n  " + "\n  ".join(refused))
    assert not wrong, wrong
