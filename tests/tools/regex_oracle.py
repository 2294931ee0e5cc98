#!/usr/bin/env python3
"""Python's `re` as the gold standard for cfgmask's regex front end.

Writes a TSV to stdout, one row per (pattern, text) pair:

    M <TAB> pattern <TAB> text <TAB> match length in UTF-8 bytes or -1 <TAB> lo <TAB> hi

where lo/hi are sre_parse's getwidth() of the pattern (what Lark uses to
order terminals), and one row per pattern that must be rejected:

    E <TAB> pattern <TAB> syntax|unsupported <TAB> code-point offset

Patterns and texts are escaped byte-wise over their UTF-8 encoding:
printable ASCII other than backslash stays, every other byte is \\xHH.

The patterns are: hand-written edge cases, at least 2000 random regexes from a
grammar of the constructs cfgmask supports (fixed seed), and every terminal
of Lark's python.lark, lark.lark and common.lark (as `to_regexp()`).  Each
gets about 20 texts: random strings over a small alphabet that includes
multi-byte and case-folding characters, plus strings built from pieces of the
pattern so that matches are common.  Read by tests/regex_test.cc.
"""
import os
import random
import re
import sys
from re import _parser as sre_parse

# Fixed by default; CFGMASK_REGEX_ORACLE_SEED / _COUNT widen a local run.
SEED = int(os.environ.get("CFGMASK_REGEX_ORACLE_SEED", "20240611"))
N_RANDOM = int(os.environ.get("CFGMASK_REGEX_ORACLE_COUNT", "2200"))
TEXTS_PER_PATTERN = 20

# Characters with interesting case folding or multi-byte encodings.
ALPHABET = ["a", "b", "c", "A", "B", "k", "K", "s", "S", "i", "I", "0", "1", "9", "_",
            " ", "\n", "\t", "\"", "\\", "-", ".", "é", "É", "ǅ", "ǆ", "Ǆ", "ß", "ẞ",
            "İ", "ı", "\u212a", "ſ", "€", "µ", "Μ", "μ", "٣", "\u3000", "😀", "𐐀", "𐐨"]

EDGE_CASES = [
    "a|ab", "ab|a", "(?:a|ab)c", "a*?", "a+?", "a??", "a{2,3}?", "a{2,}?", "(?:ab)*?b",
    "(a|b)*c", "(a*)*", "(a*)+", "(a?)*b", "(?:|a)*", "(?:a|)*", "(?:|a)+", "(?:a|)+?",
    "(?:a?){2,3}", "(?:a?){2,3}?", "(?:(?:a|)b?)*", "(?:a*b*)*c", "((a)|b)*?a",
    "(?:(?!a)|b)*", "[\\w]+", "\\w+", "\\W+", "\\d+", "\\s+", "\\S+", "\\D",
    "(?i)ǅ", "(?i)ǆ+", "(?i)ß", "(?i)ẞ", "(?i)İ", "(?i)i", "(?i)ı", "(?i)k", "(?i)\u212a",
    "(?i)s", "(?i)ſ", "(?i)µ", "(?i)[a-z]+", "(?i)[^a-z]+", "(?i)[k]", "(?i)[ǅx]",
    "(?i)[\\w]", "(?i)[a\\W]", "(?i)𐐀", "(?i)[𐐀a]", "(?i)[𐐀-𐐨]", "(?i)𐐀|a",
    "(?i)[^𐐨b]", "(?i:a)b", "a(?i:b)c", "(?i)a(?-i:b)", "(?s).+", ".+", "(?s:.)a",
    "0(?![1-9])", "0(?!\\d)\\w*", "\"(?!\"\").*?(?<!\\\\)(\\\\\\\\)*?\"",
    "(?<!\\\\)\"", "a(?<=a)b", "a(?<!a)b", "(?<![a-c])x", ".(?<=[\\n])", "(?:a(?!b))+",
    "(?x) a b # comment\n c", "(?x)[ ]a", "(?x)a\\ b", "(?x)a{2, 3}", "a{,2}", "a{2}",
    "a{}", "a{x}", "a{1,x}", "{", "}", "a{,}", "\\x41\\u00e9\\U0001F600", "\\101\\0\\012",
    "[\\x00-\\x7f]+", "[^\\x00-\\x7f]+", "[\\u0100-\\uffff]", "[\\U00010000-\\U0010ffff]",
    "[]a]", "[^]a]", "[a-]", "[-a]", "[\\]]", "[\\d-]", "[a\\-z]", "[\\b]", "\\.",
    "(?P<n>a)(?:b)", "(?#comment)a", "(?u)\\w", "(?a)\\w+", "(?a)(?i)k", "(?:)", "()",
    "a||b", "|a", "(?:a|b|c)", "[ab]|c", "ab|ac", "ab|ac|ad", "(?:ab)|(?:ac)",
    "(?:a*)*b", "(?:a|b)*?b", "(?:a+|b)*c", "((?:a|b)*)*c", "(?:a{0,2}){0,2}b",
    "(?:(?:a?)*)*", "(?:a??)+", "(?:a??)*?b", "(?:x|(?:|a))*",
    "[\\s\\S]", "[^\\s\\S]", "[^\\w\\W]?a", "(?s:[^a])",
    # \Z inside a negative look-ahead: "a keyword not followed by a word
    # character or by the end of the text".
    "a(?!b(?:c|\\Z))", "(?!(?:if|in)(?:[^a-z]|\\Z))[a-z]+", "x(?!\\Z)", "(?:a(?!\\Z))+",
    "(?i)(?!(?:select|from)(?:[ ;]|\\Z))[a-z]+",
]

# (pattern, expected kind, expected code-point offset)
ERROR_CASES = [
    ("(a)\\1", "unsupported", 3),
    ("(?P<x>a)(?P=x)", "unsupported", 8),
    ("(?=a)", "unsupported", 0),
    ("ab(?<=ab)", "unsupported", 2),
    ("(?<=é)", "unsupported", 0),
    ("(?i)(?<!k)", "unsupported", 4),
    ("^a", "unsupported", 0),
    ("a$", "unsupported", 1),
    ("\\Aa", "unsupported", 0),
    ("a\\Z", "unsupported", 1),
    ("\\bfoo\\b", "unsupported", 0),
    ("x\\B", "unsupported", 1),
    ("(a)(?(1)b|c)", "unsupported", 3),
    ("(?>ab)", "unsupported", 0),
    ("a*+", "unsupported", 1),
    ("(?!(?!a))", "unsupported", 0),
    ("é(?=a)", "unsupported", 1),
    ("\\N{EM DASH}", "unsupported", 0),
]

SYNTAX_ERRORS = [
    "(", ")", "a)", "[a", "[b-a]", "*", "a**", "a{3,2}", "(?P<1>a)", "\\", "\\q", "(?z)",
    "(?<a)", "x(?i)", "\\2", "(a\\1)", "(?P=zz)", "[\\d-z]", "\\x4", "\\u12",
    "(?<=a+)", "a{4294967295}", "(?i-i:a)", "(?-:a)", "(?#abc", "a|*", "(?P<a>x)(?P<a>y)",
]


def escape(s):
    out = []
    for b in s.encode("utf-8"):
        if 0x20 <= b < 0x7F and b != 0x5C:
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return "".join(out)


def width(pattern):
    lo, hi = sre_parse.parse(pattern).getwidth()
    return lo, hi


class Generator:
    """Random regexes over the constructs cfgmask supports."""

    LITERALS = ["a", "b", "c", "A", "k", "K", "s", "i", "0", "1", " ", "\\n", "é", "É", "ß",
                "ǅ", "İ", "ı", "\u212a", "ſ", "€", "😀", "𐐀", "\\.", "\\\\", "\\-", "\"",
                "\\x41", "\\u00e9", "\\t", "-", "_"]
    CLASS_ESC = ["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"]
    CLASS_ATOMS = ["a", "b", "k", "s", "0", "9", "é", "ß", "ǅ", "İ", "\u212a", "€", "😀", "𐐀",
                   "\\n", "\\\\", "\\]", "\\-", " ", "_", "\""]
    RANGES = ["a-c", "A-Z", "0-9", "a-z", "à-ÿ", "\\x00-\\x1f", "Ā-ſ", "𐐀-𐑏", "!-/", "ǅ-ǈ"]
    ASCII_LB = ["a", "b", "\\\\", "\"", "[ab]", "[0-9]", "[^\\x80-\\U0010ffff]", "\\n", "[\\t ]"]

    def __init__(self, rng):
        self.rng = rng

    def char_class(self):
        r = self.rng
        parts = []
        for _ in range(r.randint(1, 3)):
            k = r.random()
            if k < 0.35:
                parts.append(r.choice(self.CLASS_ATOMS))
            elif k < 0.65:
                parts.append(r.choice(self.RANGES))
            else:
                parts.append(r.choice(self.CLASS_ESC))
        neg = "^" if r.random() < 0.3 else ""
        return "[" + neg + "".join(parts) + "]"

    def atom(self, depth, in_lookahead):
        r = self.rng
        k = r.random()
        if depth <= 0 or k < 0.35:
            return r.choice(self.LITERALS)
        if k < 0.45:
            return r.choice(self.CLASS_ESC + ["."])
        if k < 0.60:
            return self.char_class()
        if k < 0.80:
            opener = r.choice(["(", "(?:", "(?:", "(?P<g%d>" % r.randint(0, 10**6),
                               "(?i:", "(?s:", "(?-i:", "(?is:"])
            return opener + self.alt(depth - 1, in_lookahead) + ")"
        if k < 0.88 and not in_lookahead:
            return "(?!" + self.alt(depth - 1, True) + ")"
        if k < 0.94 and not in_lookahead:
            return "(?<" + r.choice("=!") + r.choice(self.ASCII_LB) + ")"
        return r.choice(self.LITERALS)

    def quantified(self, depth, in_lookahead):
        r = self.rng
        a = self.atom(depth, in_lookahead)
        if a.startswith("(?<") or a.startswith("(?!"):
            return a
        k = r.random()
        if k < 0.55:
            return a
        q = r.choice(["*", "+", "?", "{2}", "{1,}", "{0,2}", "{,2}", "{1,3}", "{0}", "{2,}"])
        if r.random() < 0.35:
            q += "?"
        return a + q

    def seq(self, depth, in_lookahead):
        return "".join(self.quantified(depth, in_lookahead)
                       for _ in range(self.rng.randint(0, 4)))

    def alt(self, depth, in_lookahead=False):
        n = 1 if self.rng.random() < 0.6 else self.rng.randint(2, 3)
        return "|".join(self.seq(depth, in_lookahead) for _ in range(n))

    def pattern(self):
        r = self.rng
        p = self.alt(3)
        k = r.random()
        if k < 0.1:
            p = "(?i)" + p
        elif k < 0.15:
            p = "(?s)" + p
        return p


def texts_for(pattern, rng, extra=()):
    pieces = [c for c in pattern if c not in "()[]{}?*+|\\^:!<=" and not c.isdigit()]
    pieces += [c for c in ALPHABET]
    out = ["", *extra]
    while len(out) < TEXTS_PER_PATTERN + len(extra):
        n = rng.randint(1, 9)
        if rng.random() < 0.5:
            src = pieces
        else:
            src = ALPHABET
        out.append("".join(rng.choice(src) for _ in range(n)))
    return out


def match_row(pattern, text, lo, hi):
    m = re.match(pattern, text)
    n = -1 if m is None else len(text[:m.end()].encode("utf-8"))
    return "M\t%s\t%s\t%d\t%d\t%d" % (escape(pattern), escape(text), n, lo, hi)


def lark_terminals():
    import lark
    from lark import Lark
    from lark.indenter import PythonIndenter
    from lark.load_grammar import load_grammar
    d = os.path.join(os.path.dirname(lark.__file__), "grammars")
    pats = []
    py = Lark.open(os.path.join(d, "python.lark"), parser="lalr", start="file_input",
                   postlex=PythonIndenter())
    pats += [t.pattern.to_regexp() for t in py.terminals]
    lk = Lark.open(os.path.join(d, "lark.lark"), parser="lalr", start="start")
    pats += [t.pattern.to_regexp() for t in lk.terminals]
    src = open(os.path.join(d, "common.lark")).read()
    names = re.findall(r"^([A-Z_][A-Z_0-9]*)\s*(?:\.\d+)?\s*:", src, re.M)
    g = "start: " + " | ".join(names) + "\n%import common (" + ", ".join(names) + ")\n"
    grammar = load_grammar(g, "<common>", [], False)
    if isinstance(grammar, tuple):
        grammar = grammar[0]
    terms, _, _ = grammar.compile(["start"], set(names))
    pats += [t.pattern.to_regexp() for t in terms]
    return list(dict.fromkeys(pats))


CODE_SAMPLES = [
    '"abc"', "'x'", '"a\\"b"', "'a\\'b'", '"""doc\nstring"""', "'''x'''", 'b"bytes"',
    'rb"raw\\d"', 'f"{x}"', "123", "0x1F", "0o17", "0b101", "1_000", "1.5e10", "1.", ".5",
    "1e-3", "10j", "abc_def", "_x9", "é_ident", "# comment\n", "  \n", "\n    x", "if",
    "/* c */", "// c\n", "-- c\n", "\"unterminated", "\"a\\\\\"", "\"a\\\\\\\"b\"", "->",
    "**=", "//=", "...", "!=", "<>", ":=", "@", "$", "0", "00", "007", "1__0", "\t\f x",
    "\\\n", "?foo", "!rule", "_TERM", "\"i\"i", "/re/i", "/a\\/b/", "%import", "~ 2..3",
]


def main():
    rng = random.Random(SEED)
    out = sys.stdout
    gen = Generator(rng)
    patterns = list(EDGE_CASES)
    seen = set(patterns)
    while len(patterns) < len(EDGE_CASES) + N_RANDOM:
        p = gen.pattern()
        if p in seen:
            continue
        try:
            re.compile(p)
            width(p)
        except (re.error, OverflowError, RecursionError):
            continue
        seen.add(p)
        patterns.append(p)
    for p in patterns:
        lo, hi = width(p)
        for t in texts_for(p, rng):
            out.write(match_row(p, t, lo, hi) + "\n")
    for p in lark_terminals():
        lo, hi = width(p)
        for t in texts_for(p, rng, CODE_SAMPLES):
            out.write(match_row(p, t, lo, hi) + "\n")
    for p, kind, offset in ERROR_CASES:
        re.compile(p)  # valid Python: the error is ours
        out.write("E\t%s\t%s\t%d\n" % (escape(p), kind, offset))
    for p in SYNTAX_ERRORS:
        try:
            re.compile(p)
        except re.error as e:
            out.write("E\t%s\tsyntax\t%d\n" % (escape(p), -1 if e.pos is None else e.pos))
            continue
        except OverflowError:
            out.write("E\t%s\tsyntax\t-1\n" % escape(p))
            continue
        raise SystemExit("expected a syntax error: %r" % p)


if __name__ == "__main__":
    main()
