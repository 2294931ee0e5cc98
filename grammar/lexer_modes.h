// Lexer modes, the data: a partition of a grammar's lexed terminals such
// that every scanner of Lark's contextual lexer lies within one mode plus the
// shared terminals (the %ignore'd ones and the indenter's newline).  The
// analysis that finds them in the LALR tables is parser/lexer_modes.h; the
// lexer that keeps them apart is lexer/terminal_automaton.h.  One struct for
// both, so that the compile hands the analysis's answer to the lexer as is.
#ifndef CFGMASK_GRAMMAR_LEXER_MODES_H_
#define CFGMASK_GRAMMAR_LEXER_MODES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace cfgmask {

struct LexerModes {
  static constexpr int32_t kShared = -1;        // in every scanner
  static constexpr int32_t kNeverScanned = -2;  // in no scanner (or never lexed)
  int32_t num_modes = 0;       // 0: no split (one mode, every terminal)
  std::vector<int32_t> mode_of;  // per grammar terminal: mode, kShared or kNeverScanned
  // Per grammar terminal: the modes the terminal after it can be lexed in,
  // sorted (for a shared terminal, the current mode is added by the lexer).
  std::vector<std::vector<int32_t>> after;
  int32_t initial_mode = 0;    // the mode of the start state's scanner
  // Per mode m: the terminals of the other modes.  A scanner holds one of
  // them exactly when it belongs to another mode: how the runtime tells
  // that a shared terminal (blanks, a comment) was lexed in the wrong mode,
  // since every scanner takes those.
  std::vector<std::vector<int32_t>> foreign;
  // Per mode m: the terminals in every scanner lexed in mode m (the shared
  // ones included).  Once one of them has matched at a terminal's start, no
  // terminal after it in Lark's order can win there: the lexer drops them.
  std::vector<std::vector<int32_t>> certain;
  // One line per mode: its terminals by name (for reports and errors).
  std::string DebugString(const Grammar& grammar) const;
};

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_LEXER_MODES_H_
