// Lexer modes: which terminals Lark's contextual lexer can ever scan together.
//
// Lark scans in each parser state with that state's accepted terminals plus
// the %ignore'd ones and the post-lexer's always-accepted ones (the Python
// indenter's newline).  Call the last two "shared": every scanner holds them.
// It scans only in the start state and in states a shift enters (a state
// entered only by a goto never scans).  Two other terminals that such a
// state accepts together are in one mode; a mode is a connected part of
// that relation.  Every scanner then lies within
// one mode plus the shared terminals, so a lexer that starts, after each
// terminal, only the terminals of the modes that can come next (and the
// shared ones) lexes exactly as Lark does, and never carries, say, the text
// of an f-string beside code in one state (lexer/terminal_automaton.h).
//
// A grammar whose terminals form one part has no modes (num_modes 0): the
// lexer then starts every terminal after every boundary, as it always has.
// Tested by lexer_modes_test.cc and the Lark differential tests.
#ifndef CFGMASK_PARSER_LEXER_MODES_H_
#define CFGMASK_PARSER_LEXER_MODES_H_

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/lexer_modes.h"
#include "parser/lalr.h"

namespace cfgmask {

// The modes of `tables` (start state tables.start_state[0]).  `shared`: the
// %ignore'd terminals and the indenter's newline; `indent`/`dedent`: the
// indenter's terminals (-1: none), which come between a newline and the
// next terminal, so the modes after a newline include those after them.
LexerModes ComputeLexerModes(const Grammar& grammar, const ParseTables& tables,
                             const std::vector<int32_t>& shared, int32_t indent, int32_t dedent);

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_LEXER_MODES_H_
