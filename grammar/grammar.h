// The grammar IR: what the .lark reader (lark_reader.h) produces and every
// later phase consumes.  It is Lark's own compiled form of a grammar: EBNF
// already expanded to BNF exactly as lark.load_grammar does it (so that our
// LALR(1) tables, and therefore the contextual lexer's terminal sets, are the
// ones Lark builds), and terminals already joined into one pattern each, with
// the pattern text Lark builds (its length is one of Lark's lexer sort keys).
// Tested by grammar_test.cc and lark_reader_test.cc.
#ifndef CFGMASK_GRAMMAR_GRAMMAR_H_
#define CFGMASK_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/base/status.h"

namespace cfgmask {

enum class PatternKind : uint8_t {
  kString,    // PatternStr: `value` is the literal text (unescaped)
  kRegex,     // PatternRE: `value` is Python re source, as Lark builds it
  kDeclared,  // %declare'd: produced by a post-lexer, never by the lexer
};

struct TerminalDef {
  std::string name;                   // Lark's name (NAME, LPAR, __ANON_3, ...)
  PatternKind kind = PatternKind::kString;
  std::string value;                  // Lark's Pattern.value
  std::string flags;                  // sorted flag letters, e.g. "is"
  int32_t priority = 0;               // Lark's terminal priority (default 0)
  // "FILE:LINE:COL" of its definition, for error messages; empty when it
  // has none of its own (an anonymous terminal, a grammar built in memory).
  std::string where;

  // Lark's Pattern.to_regexp(): re.escape(value) for strings; then each flag
  // wraps the text as "(?f:...)" in the order Lark iterates its flag set.
  std::string ToRegexp() const;
};

// Symbols are dense ids: [0, num_terminals) are terminals, then nonterminals.
using SymbolId = int32_t;

struct Rule {
  SymbolId lhs = -1;               // a nonterminal symbol id
  std::vector<SymbolId> rhs;       // empty for an epsilon rule
  int32_t priority = 0;            // Lark rule priority (used for r/r conflicts)
  int32_t order = 0;               // index of the expansion within its origin
};

struct Grammar {
  std::vector<TerminalDef> terminals;      // terminal id = index
  std::vector<std::string> nonterminals;   // nonterminal k has symbol id T + k
  std::vector<Rule> rules;                 // in Lark's order
  std::vector<int32_t> ignore;             // terminal ids named by %ignore
  std::vector<int32_t> declared;           // terminal ids named by %declare
  std::vector<std::string> start;          // start rule names ("start" default)
  // Per nonterminal: "FILE:LINE:COL" of the rule that defines it (empty for
  // EBNF helpers and grammars built in memory, or when not filled).
  std::vector<std::string> nonterminal_where;

  int32_t num_terminals() const { return static_cast<int32_t>(terminals.size()); }
  int32_t num_symbols() const {
    return num_terminals() + static_cast<int32_t>(nonterminals.size());
  }
  bool IsTerminal(SymbolId s) const { return s < num_terminals(); }
  const std::string& SymbolName(SymbolId s) const {
    return IsTerminal(s) ? terminals[s].name : nonterminals[s - num_terminals()];
  }
  // "FILE:LINE:COL: " for symbol s when its definition is known, else "":
  // the prefix of an error message about s.
  std::string WherePrefix(SymbolId s) const;
  // -1 when absent.
  int32_t FindTerminal(const std::string& name) const;
  SymbolId FindNonterminal(const std::string& name) const;  // symbol id

  // Readable listing of terminals and rules, for tests and bug reports.
  std::string DebugString() const;
};

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_GRAMMAR_H_
