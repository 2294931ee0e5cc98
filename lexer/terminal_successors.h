// What can come right after a terminal's match ends: for a terminal t, the
// terminals whose match can start at the byte where t's match (Lark's
// leftmost-first, greedy) stops, found on the terminal automaton itself, so
// that priorities, greedy quantifiers and look-aheads count exactly as the
// lexer has them.  The runtime checks a token that ends inside such a
// terminal (maskstore/hypothesis_parser.h, ItemScanner::TailOk):
//  - %ignore'd t (a comment, blanks): the parser state does not change, so
//    some terminal t leaves possible must be taken next, or the input end.
//    After `x =`, ` # c` leaves only the newline, which the parser cannot
//    take there: the token is refused.
//  - other t, only where the grammar lets follow t a terminal that cannot
//    start where t stops (`NAME NAME` without a separator): after t, some
//    terminal that can start there must be taken.
//
// The answer is a superset (sound for masking): a continuation killed only
// by a later character, or by a scanner that lacks a blocking terminal, is
// kept.  A character above ASCII counts whole (all its UTF-8 bytes), never
// its lead byte alone: a successor is one the lexer can really start after
// t ends, with the character read (terminal_successors.cc).
// Tested by viable_prefix_test.cc (masks against the brute-force reference on
// random grammars with an %ignore'd comment, some with classes above ASCII,
// the minimal cases of both kinds, a comment before a name that starts with
// a character above ASCII).
#ifndef CFGMASK_LEXER_TERMINAL_SUCCESSORS_H_
#define CFGMASK_LEXER_TERMINAL_SUCCESSORS_H_

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/base/status.h"

namespace cfgmask {

// The exploration bound the compile uses (lexer states per terminal).
inline constexpr int32_t kSuccessorMaxStates = 20000;

struct TerminalSuccessors {
  // Per terminal: 1 when nothing need be checked after it, else `next[t]` lists, sorted, the terminals other than %ignore'd ones
  // that can be the next one fed to the parser after t: directly, or after
  // a chain of %ignore'd terminals.  The end of the input may always follow.
  std::vector<uint8_t> any;
  std::vector<std::vector<int32_t>> next;
  // Per terminal: the fewest bytes of a text the lexer ends as that terminal
  // from the start of a terminal (any scanner); a lower bound of 1 where the
  // search stopped first, 0 for terminals never lexed (declared ones).  The
  // completion search's estimate (runtime/completion.h) adds these up.
  std::vector<int32_t> min_bytes;
};

// Computes the successors of every lexed terminal of `grammar`.  A terminal
// gets any = 1 when every terminal that may follow it (for an %ignore'd one:
// every terminal; else the grammar's FOLLOW) can start where its match
// stops, or when exploring it passed `max_states` lexer states (an eighth of
// that for terminals not ignored); the indenter's newline always does.
// Builds its own terminal automaton (the compile's is left as it is).
Status ComputeTerminalSuccessors(const Grammar& grammar, int32_t indenter_nl, int32_t max_states,
                                 TerminalSuccessors* out);

}  // namespace cfgmask

#endif  // CFGMASK_LEXER_TERMINAL_SUCCESSORS_H_
