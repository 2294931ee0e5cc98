"""Errors about a grammar's terminal or rule name the FILE:LINE:COL of its
definition: reduce/reduce conflicts, regex syntax errors and unsupported
regex features, zero-width terminals, too many look-aheads, through the command line (exit 2, one
line, no store written) and the Python package (cfgmask.Error).  A limit on
lexer states names the terminals whose threads multiply, with theirs."""
import os

import pytest

import cfgmask
from test_cli import BIN, TOK, assert_one_line_error, run

needs = pytest.mark.skipif(not (os.path.exists(BIN) and os.path.exists(TOK)),
                           reason="cfgmask binary or llama-spm tokenizer not available")

CASES = {
    # name: (grammar text, line:col of the definition, words the message has)
    "conflict": ('start: a | b\na: X\nb: X\nX: "x"\n', "2:1", "reduce/reduce conflict"),
    "regex": ("start: X\nX: /a(/\n", "2:1", "terminal X: pattern offset 1"),
    "lookbehind": ('start: X Y\nX: /(?<=a)b/\nY: "y"\n', "2:1", "lookbehind"),
    "empty": ("start: X\n\nX: /a*/\n", "3:1", "matches the empty string"),
    # More look-aheads than a pending look-ahead's encoding holds (once a
    # segmentation fault in the vocabulary walk).
    "lookaheads": ("start: X\nX: /" + "a(?!b)" * 300 + "/\n", "2:1", "at most 256"),
}


@needs
@pytest.mark.parametrize("name", sorted(CASES))
def test_command_line_names_the_definition(name, tmp_path):
    text, pos, words = CASES[name]
    grammar = tmp_path / f"{name}.lark"
    grammar.write_text(text)
    out = tmp_path / "out.cfgm"
    line = assert_one_line_error(run("compile", grammar, "--tokenizer", TOK, "-o", out))
    assert line.startswith(f"cfgmask: {grammar}:{pos}: "), line
    assert words in line, line
    assert not out.exists()


@needs
@pytest.mark.parametrize("name", sorted(CASES))
def test_python_names_the_definition(name, tmp_path):
    text, pos, words = CASES[name]
    grammar = tmp_path / f"{name}.lark"
    grammar.write_text(text)
    with pytest.raises(cfgmask.Error) as e:
        cfgmask.compile_grammar(str(grammar), TOK)
    assert f"{grammar}:{pos}: " in str(e.value), str(e.value)
    assert words in str(e.value)


# A lazy string pattern whose escapes overlap its any-character branch: its
# threads multiply in priority orders (as in cel-python's STRING_LIT), so the
# lexer states do; the limits' messages name it first, with its definition.
GROWING = 'start: (S | N)+\nS: /"(?:\\\\[abn"\\\\]|\\\\x[0-9a-f]{2}|.)*?"/\nN: /[a-z]+/\n%ignore " "\n'
LIMITS = {
    "roots": (["--max-roots", "5"], dict(max_roots=5),
              "more than 5 lexer states at token boundaries (max_roots, --max-roots)"),
    "states": (["--max-lexer-states", "30"], dict(max_lexer_states=30),
               "more than 30 lexer states (max_lexer_states, --max-lexer-states)"),
}


@needs
@pytest.mark.parametrize("name", sorted(LIMITS))
def test_state_limits_name_the_growing_terminal(name, tmp_path):
    flags, kwargs, words = LIMITS[name]
    grammar = tmp_path / "growing.lark"
    grammar.write_text(GROWING)
    out = tmp_path / "out.cfgm"
    line = assert_one_line_error(run("compile", grammar, "--tokenizer", TOK, "-o", out, *flags))
    assert line.startswith(f"cfgmask: {grammar}: {words}; the largest terminals: S ({grammar}:2:1, "), line
    assert not out.exists()
    with pytest.raises(cfgmask.Error) as e:
        cfgmask.compile_grammar(str(grammar), TOK, **kwargs)
    assert f"{words}; the largest terminals: S ({grammar}:2:1, " in str(e.value), str(e.value)
    # Raised, the same limits let it compile.
    assert cfgmask.compile_grammar(str(grammar), TOK).stats()["rows"] > 0
