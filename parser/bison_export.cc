// The grammar as a GNU Bison .y file: the oracle that checks our LR(0) states
// and LALR(1) conflict counts (bison -v writes them to its .output report).
//
// Each rule is written as its own `lhs: rhs ;` statement, in grammar order, so
// that Bison's rule k + 1 is our rule k (Bison's rule 0 is `$accept: S $end`).
// Symbol names are kept when Bison takes them as they are and renamed
// `t<id>` / `n<id>` otherwise (names that are not C identifiers, Bison's own
// `error` and `YY*`/`yy*` names, or a clash between a terminal and a
// nonterminal of the same name); renaming changes no state.
//
// Correspondence, for a grammar with the single start symbol S:
//   - states: Bison's automaton has exactly one more state than ours.  Its
//     augmentation `$accept: S $end` has the same LR(0) kernels as our
//     `$root_S: S` (lr0.cc) with `$root_S: S .` read as `$accept: S . $end`,
//     plus the final state `$accept: S $end .` entered by shifting $end;
//   - conflicts: the shift of $end in that state is our accept action, and
//     both tools count one shift/reduce per (state, terminal) and n - 1
//     reduce/reduce per (state, terminal) with n reductions, before Lark's
//     priority resolution.  LalrStats::shift_reduce and ::reduce_reduce are
//     these numbers.
// Bison deletes useless nonterminals (those that derive no terminal string)
// and their rules before building states, so the correspondence holds for
// grammars where every nonterminal is productive; our tables keep them, as
// Lark does.  With several start symbols the export names one in `%start`
// and Bison drops the rules only the others reach, so the comparison is made
// on single-start grammars.
// Tested by bison_export_test.cc.
#include <set>

#include "parser/lalr.h"

namespace cfgmask {
namespace {

bool IsPlainIdentifier(const std::string& name) {
  if (name.empty()) return false;
  const char first = name[0];
  if (!(first == '_' || (first >= 'A' && first <= 'Z') || (first >= 'a' && first <= 'z'))) return false;
  for (char c : name) {
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  if (name == "error") return false;
  if (name.size() >= 2 && ((name[0] == 'Y' && name[1] == 'Y') || (name[0] == 'y' && name[1] == 'y'))) {
    return false;
  }
  return true;
}

}  // namespace

std::string ExportBison(const Grammar& grammar, int start_index) {
  const int32_t num_symbols = grammar.num_symbols();
  std::vector<std::string> names(num_symbols);
  std::set<std::string> used;
  for (SymbolId s = 0; s < num_symbols; ++s) {
    const std::string& name = grammar.SymbolName(s);
    if (IsPlainIdentifier(name) && used.insert(name).second) names[s] = name;
  }
  for (SymbolId s = 0; s < num_symbols; ++s) {
    if (!names[s].empty()) continue;
    std::string candidate = (grammar.IsTerminal(s) ? "t" : "n") + std::to_string(s);
    while (!used.insert(candidate).second) candidate += "_";
    names[s] = candidate;
  }

  std::string text = "/* Exported by cfgmask (parser/bison_export.cc) for the Bison oracle. */\n";
  for (SymbolId s = 0; s < grammar.num_terminals(); ++s) text += "%token " + names[s] + "\n";
  if (start_index >= 0 && start_index < static_cast<int>(grammar.start.size())) {
    const std::string& start = grammar.start[start_index];
    for (size_t k = 0; k < grammar.nonterminals.size(); ++k) {
      if (grammar.nonterminals[k] == start) {
        text += "%start " + names[grammar.num_terminals() + static_cast<SymbolId>(k)] + "\n";
        break;
      }
    }
  }
  text += "%%\n";
  for (const Rule& rule : grammar.rules) {
    text += names[rule.lhs] + ":";
    if (rule.rhs.empty()) text += " %empty";
    for (SymbolId s : rule.rhs) text += " " + names[s];
    text += " ;\n";
  }
  text += "%%\n";
  return text;
}

}  // namespace cfgmask
