"""Reference oracle for token masks: is `prefix + token` a prefix of some
sentence that Lark (parser='lalr', lexer='contextual') accepts, and is
`prefix` itself a sentence?  Used by tests/bruteforce_lark_test.cc.

Grammar class (checked on load, anything else is refused): every terminal is
a literal string without spaces, except optionally NAME /[a-z]+/ and
NUMBER /[0-9]+/; `%ignore " "`; no literal ends in "z" and none is made of
digits only.

Why the check below is exact.  A text p is viable (a prefix of a sentence)
iff some candidate w0 in C(p) makes p + w0 lex, and every terminal of it be
fed to the LALR parser, without error:

  C(p) = {" "}
       | {L[k:] + " " : L a literal, 0 < k < len(L), p ends with L[:k]}
       | {"z "} if p ends with a letter and NAME exists
       | {"0 "} if p ends with a digit and NUMBER exists.

If p + w0 is fed without error, its terminal sequence is a viable prefix
(LALR never shifts a terminal that no sentence continues with), so some
terminals complete it; written out after the trailing space, each followed
by a space (NAME as "z", NUMBER as "0"), they lex as themselves in Lark's
contextual scanner, because the trailing space freezes everything before it.
So p is a prefix of a sentence.  Conversely, take any sentence p + s.  If a
terminal T of its lexing straddles the end of p, T is a literal L begun by
p's tail (p ends with L[:k]) or a NAME/NUMBER run.  Replacing s by the rest
of T and one space gives the same terminals up to the end of T: no literal
contains a space or ends in "z" or is all digits, so every alternative of
the scanner that failed in the sentence still fails (it reads the space, or
the "z"), every one that matched still matches the same bytes, and the value
of a NAME is a keyword exactly when it was before.  The space then ends T
and is ignored.  Without a straddling terminal, s is replaced by " " alone,
by the same reasoning.  The terminals fed are a prefix of the sentence's, so
the parser takes them.

Speed: the text up to the last space of p lexes the same whatever follows
(no terminal contains a space), so its parser state is computed once per
prefix and copied for every token; CFGMASK_ORACLE_SELFCHECK=1 recomputes
each verdict from the start of the text and fails on any difference.

Protocol (stdin -> stdout, one process for any number of grammars):
  {"grammar": PATH, "start": RULE, "tokens": [TEXT, ...]}   load; no answer
  {"prefix": TEXT, "tokens": [...]?}   answer: one line of '0'/'1', one per
                                       token (viability of prefix + token),
                                       then the EOS bit (prefix is a sentence)
"tokens" may be omitted to reuse the last list.  Errors: a message on
stderr and exit status 2.
"""
import json
import os
import sys

from lark import Lark
from lark.exceptions import UnexpectedInput
from lark.lexer import LexerThread
from lark.parsers.lalr_interactive_parser import InteractiveParser


class PrefixOracle:
    def __init__(self, grammar_path, start="start"):
        with open(grammar_path) as f:
            self.parser = Lark(f.read(), parser="lalr", lexer="contextual", start=start)
        self.literals = []
        self.has_name = self.has_number = False
        ignored = set(self.parser.ignore_tokens)
        for t in self.parser.terminals:
            p = t.pattern
            if t.name in ignored:
                if p.type != "str" or p.value != " ":
                    raise ValueError('only %%ignore " " is supported, got %s' % t.name)
            elif p.type == "str":
                if not p.value or " " in p.value or p.value.endswith("z") or p.value.isdigit():
                    raise ValueError("unsupported literal %r" % p.value)
                if p.flags:
                    raise ValueError("flags on literal %r" % p.value)
                self.literals.append(p.value)
            elif p.value == "[a-z]+" and not p.flags:
                self.has_name = True
            elif p.value == "[0-9]+" and not p.flags:
                self.has_number = True
            else:
                raise ValueError("unsupported terminal %s: /%s/" % (t.name, p.value))
        if not ignored:
            raise ValueError('the grammar must %ignore " "')
        self.selfcheck = os.environ.get("CFGMASK_ORACLE_SELFCHECK") == "1"
        self._base_text = None
        self._base = None  # interactive parser after the text up to the last space, or None

    def candidates(self, text):
        out = [" "]
        for lit in self.literals:
            for k in range(1, len(lit)):
                if text.endswith(lit[:k]):
                    out.append(lit[k:] + " ")
        if text:
            if self.has_name and "a" <= text[-1] <= "z":
                out.append("z ")
            if self.has_number and text[-1].isdigit():
                out.append("0 ")
        return out

    def _feeds_from(self, base, rest):
        """Lexes `rest` after the frozen state `base` and feeds every terminal."""
        ip = InteractiveParser(base.parser, base.parser_state.copy(deepcopy_values=False),
                               LexerThread.from_text(base.lexer_thread.lexer, rest))
        try:
            ip.exhaust_lexer()
            return True
        except UnexpectedInput:
            return False

    def _feeds_full(self, text):
        try:
            self.parser.parse_interactive(text).exhaust_lexer()
            return True
        except UnexpectedInput:
            return False

    def _set_base(self, text):
        if text == self._base_text:
            return
        self._base_text = text
        ip = self.parser.parse_interactive(text)
        try:
            ip.exhaust_lexer()
            self._base = ip
        except UnexpectedInput:
            self._base = None

    def viable(self, text):
        cut = text.rfind(" ") + 1
        self._set_base(text[:cut])
        if self._base is None:
            verdict = False
        else:
            rest = text[cut:]
            verdict = any(self._feeds_from(self._base, rest + w) for w in self.candidates(text))
        if self.selfcheck:
            slow = any(self._feeds_full(text + w) for w in self.candidates(text))
            if slow != verdict:
                raise AssertionError("incremental %d, full %d on %r" % (verdict, slow, text))
        return verdict

    def complete(self, text):
        try:
            self.parser.parse(text)
            return True
        except UnexpectedInput:
            return False


def main():
    oracle, tokens = None, []
    if len(sys.argv) > 1:
        oracle = PrefixOracle(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "start")
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            if "tokens" in q:
                tokens = q["tokens"]
            if "grammar" in q:
                oracle = PrefixOracle(q["grammar"], q.get("start", "start"))
                continue
            if oracle is None:
                raise ValueError("no grammar loaded")
            prefix = q["prefix"]
        except (ValueError, KeyError, OSError) as e:
            sys.stderr.write("lark_prefix_oracle: stdin:%d: %s\n" % (n, e))
            sys.exit(2)
        bits = ["1" if oracle.viable(prefix + t) else "0" for t in tokens]
        bits.append("1" if oracle.complete(prefix) else "0")
        sys.stdout.write("".join(bits) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
