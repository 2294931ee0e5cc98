// The grammar side of a compiled store, filled from the grammar, its LALR(1)
// tables and its terminal automaton: terminal tables (Lark's lexer rank,
// %ignore, brackets, keyword retyping), the parse tables, and per parser
// state the contextual lexer's scanner (CompiledStore::scanner_terms and
// scanner_alt).  The lookaheads no scanner can ever produce are removed from
// the action table, and the parser states that leaves without a completion
// are closed (parser/dead_states.h): both remove only moves that no text
// Lark accepts makes.
// Tested by viable_prefix_test.cc (masks against the brute-force reference,
// grammars with %ignore competition) and bruteforce_lark_test.cc.
#ifndef CFGMASK_MASKSTORE_SCANNER_TABLES_H_
#define CFGMASK_MASKSTORE_SCANNER_TABLES_H_

#include <cstdint>

#include "grammar/grammar.h"
#include "lexer/terminal_automaton.h"
#include "lexer/terminal_successors.h"
#include "maskstore/compiled_store.h"
#include "parser/lalr.h"

namespace cfgmask {

// The Python indenter's terminals (_NEWLINE, _INDENT, _DEDENT) when the
// compile uses the indenter; all -1 when it does not.
struct IndenterTerminals {
  int32_t nl = -1, indent = -1, dedent = -1;
  bool used() const { return nl >= 0; }
};

void FillGrammarTables(const Grammar& g, const ParseTables& pt, const TerminalAutomaton& a,
                       const IndenterTerminals& indenter, CompiledStore* out);

// The tables of what may follow each terminal (CompiledStore::terminal_next_*,
// terminal_min_bytes), from `successors` (ComputeTerminalSuccessors), for a
// store whose FillGrammarTables has run.  Apart from FillGrammarTables since
// the vocabulary walk does not read them: the compile computes the
// successors beside the walk (runtime/compile/compile.cc) and fills these
// after it.
void FillSuccessorTables(const TerminalSuccessors& successors, CompiledStore* out);

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_SCANNER_TABLES_H_
