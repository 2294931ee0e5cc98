"""Lark's LALR(1) tables, printed for the C++ tests to compare with.

  lark_tables.py GRAMMAR.lark START
      Loads the grammar with Lark(parser='lalr', lexer='contextual') (plus
      PythonIndenter when START is file_input, as for python.lark) and prints
      `states N`, then one line per state: the sorted names of the terminals
      that have an action there, '$END' excluded (exactly the set Lark's
      contextual lexer scans with).

  lark_tables.py --rules GRAMMAR.lark START
      Prints the BNF Lark compiled from the grammar, in the format below.

  lark_tables.py --bnf < GRAMMARS
      Runs Lark's LALR_Analyzer on BNF grammars given as text, with no lexer
      involved.  Each grammar is a block of lines:
          grammar
          start NAME...
          terminals NAME...
          rule LHS PRIORITY SYMBOL...
          end
      and its answer is `error` (a GrammarError, e.g. a reduce/reduce
      collision) or `states N` followed by one line per state: its actions
      as sorted `TERMINAL:s` (shift) / `TERMINAL:rK` (reduce by rule K, in
      input order) words, '$END' included except in the end states, where
      Lark's parser stops before looking at it.

Used by tests/lalr_test.cc.
"""
import os
import sys

from lark import Lark
from lark.common import ParserConf
from lark.exceptions import GrammarError
from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal
from lark.indenter import PythonIndenter
from lark.parsers.lalr_analysis import LALR_Analyzer, Shift


def load(path, start):
    postlex = PythonIndenter() if start == 'file_input' else None
    with open(path) as f:
        return Lark(f.read(), parser='lalr', lexer='contextual', start=start,
                    postlex=postlex, import_paths=[os.path.dirname(path)])


def print_accepted_terminals(path, start):
    parser = load(path, start)
    table = parser.parser.parser._parse_table
    nonterminals = {rule.origin.name for rule in parser.rules}
    print('states', len(table.states))
    for state in sorted(table.states):
        names = sorted(name for name in table.states[state]
                       if name not in nonterminals and name != '$END')
        print(' '.join(names))


def print_rules(path, start):
    parser = load(path, start)
    rules = parser.rules
    nonterminals = {rule.origin.name for rule in rules}
    terminals = sorted({sym.name for rule in rules for sym in rule.expansion
                        if sym.name not in nonterminals})
    print('grammar')
    print('start', start)
    print('terminals', ' '.join(terminals))
    for rule in rules:
        print('rule', rule.origin.name, rule.options.priority or 0,
              ' '.join(sym.name for sym in rule.expansion))
    print('end')


def analyse(start, terminals, rule_lines):
    terminal_names = set(terminals)
    rules = []
    for order, (lhs, priority, rhs) in enumerate(rule_lines):
        expansion = [Terminal(s) if s in terminal_names else NonTerminal(s) for s in rhs]
        rules.append(Rule(NonTerminal(lhs), expansion, order=order,
                          options=RuleOptions(priority=priority or None)))
    index = {id(rule): k for k, rule in enumerate(rules)}
    try:
        analysis = LALR_Analyzer(ParserConf(rules, {}, start))
        analysis.compute_lalr()
    except GrammarError:
        print('error')
        return
    table = analysis.parse_table
    end_states = set(table.end_states.values())
    print('states', len(table.states))
    for state in sorted(table.states):
        words = []
        for name, (action, arg) in table.states[state].items():
            if name not in terminal_names and name != '$END':
                continue
            if name == '$END' and state in end_states:
                continue
            words.append(name + (':s' if action is Shift else ':r%d' % index[id(arg)]))
        print(' '.join(sorted(words)))


def run_bnf(lines):
    start, terminals, rule_lines = [], [], []
    for line in lines:
        words = line.split()
        if not words:
            continue
        if words[0] == 'grammar':
            start, terminals, rule_lines = [], [], []
        elif words[0] == 'start':
            start = words[1:]
        elif words[0] == 'terminals':
            terminals = words[1:]
        elif words[0] == 'rule':
            rule_lines.append((words[1], int(words[2]), words[3:]))
        elif words[0] == 'end':
            analyse(start, terminals, rule_lines)
    sys.stdout.flush()


def main():
    if sys.argv[1] == '--bnf':
        run_bnf(sys.stdin)
    elif sys.argv[1] == '--rules':
        print_rules(sys.argv[2], sys.argv[3])
    else:
        print_accepted_terminals(sys.argv[1], sys.argv[2])


if __name__ == '__main__':
    main()
