"""Canonical dump of the grammar Lark compiles, for the differential test.

Usage: lark_dump.py GRAMMAR.lark START [START...]

Loads the grammar with lark.Lark.open(parser='lalr', lexer='contextual') and
prints the same text as cfgmask's Grammar::DebugString(): start symbols,
terminals sorted by name (kind, value, flags, priority), rules in Lark's
order, the ignore list and the %declare'd terminals.  Lark iterates a
pattern's flag set in hash order, which varies between processes; to make
joined pattern text reproducible both sides use sorted flag order, so the
dump pins Pattern._get_flags to sorted order before loading.
Used by tests/lark_reader_test.cc.
"""
import sys

import lark
from lark import load_grammar
from lark.lexer import Pattern, PatternRE


def _sorted_flags(self, value):
    for f in sorted(self.flags):
        value = '(?%s:%s)' % (f, value)
    return value


Pattern._get_flags = _sorted_flags


def quote(s):
    out = ["'"]
    for ch in s:
        c = ord(ch)
        if ch == '\\':
            out.append('\\\\')
        elif ch == "'":
            out.append("\\'")
        elif ch == '\n':
            out.append('\\n')
        elif ch == '\r':
            out.append('\\r')
        elif ch == '\t':
            out.append('\\t')
        elif c < 0x20 or c == 0x7f:
            out.append('\\x%02x' % c)
        else:
            out.append(ch)
    out.append("'")
    return ''.join(out)


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    path, start = sys.argv[1], sys.argv[2:]
    try:
        parser = lark.Lark.open(path, parser='lalr', lexer='contextual', start=start)
        terminals, rules, ignore = parser.terminals, parser.rules, parser.ignore_tokens
    except lark.exceptions.GrammarError as e:
        if 'collision' not in str(e) and 'conflict' not in str(e).lower():
            raise
        # Not LALR(1): the compiled grammar is still well defined; take it
        # from the same compile step that Lark() runs before building tables.
        sys.stderr.write('lark_dump: not LALR(1), dumping the compiled grammar only\n')
        with open(path, encoding='utf8') as f:
            grammar, _ = load_grammar.load_grammar(f.read(), path, [], False)
        terminals, rules, ignore = grammar.compile(start, set())
    lines = ['start: ' + ' '.join(start)]
    term_names = {t.name for t in terminals}
    for t in sorted(terminals, key=lambda t: t.name):
        kind = 're' if isinstance(t.pattern, PatternRE) else 'str'
        lines.append('terminal %s %s %s flags=%s priority=%d' % (
            t.name, kind, quote(t.pattern.value), quote(''.join(sorted(t.pattern.flags))),
            t.priority))
    declared = set()
    for r in rules:
        syms = ''.join(' ' + s.name for s in r.expansion)
        for s in r.expansion:
            if s.is_term and s.name not in term_names:
                declared.add(s.name)
        lines.append('rule %s:%s (priority=%d order=%d)' % (
            r.origin.name, syms, r.options.priority or 0, r.order))
    lines.append('ignore:' + ''.join(' ' + n for n in ignore))
    lines.append('declared:' + ''.join(' ' + n for n in sorted(declared)))
    sys.stdout.buffer.write(('\n'.join(lines) + '\n').encode('utf-8'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
