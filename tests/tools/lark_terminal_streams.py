"""Reference oracle for parser_differential_test.cc and parser_bench.cc:
Lark's own terminal streams for CPython stdlib files, and Lark's parser
verdicts on mutated streams.

Lark (parser='lalr', lexer='contextual', postlex=PythonIndenter(),
start='file_input') lexes each file through its interactive parser, so the
stream is exactly what the parser saw: the post-lexed terminals, _NEWLINE,
_INDENT and _DEDENT included, %ignore'd ones left out.  A file whose lexing
or parsing fails (Python 2 sources, bad test data) is reported as rejected.

Each accepted stream is then mutated K times (delete one terminal, duplicate
one, swap two adjacent ones; positions from a fixed seed) and the mutated
stream is fed to a fresh interactive parser, terminal by terminal with empty
values, until one is refused.  Reported: the length L of the longest accepted
prefix, and whether $END is accepted after those L terminals.

usage: lark_terminal_streams.py GRAMMAR_DIR N K [SEED]
  N: files, evenly spaced over the sorted stdlib *.py list (0 = all of them)
  K: mutations per accepted file
Output, one line each, fields separated by single spaces:
  F <index> <accepted 0|1> <path relative to the stdlib> <count> <terminal>...
  M <file index> <op D|U|S> <position> <longest accepted prefix> <end 0|1>
D deletes the terminal at position, U inserts a copy of it after it, S swaps
it with the next one.  A rejected file's F line lists no terminals.
"""
import os
import pathlib
import random
import sys
import sysconfig

from lark import Lark, Token
from lark.indenter import PythonIndenter


def stdlib_files():
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if "site-packages" in rel.parts or " " in str(rel):
            continue
        files.append(path)
    return root, sorted(files)


def lex(parser, text):
    """The terminal names Lark's parser consumed, or None if it failed."""
    try:
        ip = parser.parse_interactive(text)
        names = [tok.type for tok in ip.iter_parse()]
        ip.feed_eof()
        return names
    except Exception:
        return None


def feed_all(parser, names):
    """A parser after feeding `names`; None if one is refused."""
    ip = parser.parse_interactive("")
    try:
        for name in names:
            ip.feed_token(Token(name, ""))
    except Exception:
        return None
    return ip


def verdict(parser, names):
    """(longest accepted prefix, $END accepted after it)."""
    ip = parser.parse_interactive("")
    accepted = len(names)
    for i, name in enumerate(names):
        try:
            ip.feed_token(Token(name, ""))
        except Exception:
            accepted = i
            break
    if accepted < len(names):
        # A refused terminal may have left reductions on the stack: replay.
        ip = feed_all(parser, names[:accepted])
    try:
        ip.feed_eof()
        return accepted, 1
    except Exception:
        return accepted, 0


def mutate(rng, names):
    op = rng.choice("DUS")
    if op == "S":
        pos = rng.randrange(len(names) - 1)
        out = list(names)
        out[pos], out[pos + 1] = out[pos + 1], out[pos]
    elif op == "D":
        pos = rng.randrange(len(names))
        out = names[:pos] + names[pos + 1:]
    else:
        pos = rng.randrange(len(names))
        out = names[:pos + 1] + names[pos:]
    return op, pos, out


def main():
    grammar_dir, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    parser = Lark.open(os.path.join(grammar_dir, "python.lark"), parser="lalr",
                       lexer="contextual", postlex=PythonIndenter(), start="file_input")
    root, files = stdlib_files()
    if 0 < n < len(files):
        files = [files[i * len(files) // n] for i in range(n)]
    rng = random.Random(seed)
    out = sys.stdout
    for index, path in enumerate(files):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            text = None
        names = lex(parser, text) if text is not None else None
        rel = str(path.relative_to(root))
        if names is None:
            out.write(f"F {index} 0 {rel} 0\n")
            continue
        out.write(f"F {index} 1 {rel} {len(names)} {' '.join(names)}\n")
        if len(names) < 2:
            continue
        for _ in range(k):
            op, pos, mutated = mutate(rng, names)
            accepted, end = verdict(parser, mutated)
            out.write(f"M {index} {op} {pos} {accepted} {end}\n")
    out.flush()


if __name__ == "__main__":
    main()
