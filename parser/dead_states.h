// LALR table surgery after the lexer has removed lookaheads: the parser
// states from which no completion exists, whatever the stack below, lose
// their actions and the shifts into them.  See dead_states.cc.
// Tested by viable_prefix_test.cc (grammars whose unlexable lookaheads
// strand states: masks against the brute-force reference).
#ifndef CFGMASK_PARSER_DEAD_STATES_H_
#define CFGMASK_PARSER_DEAD_STATES_H_

#include <cstdint>

#include "parser/lr_core.h"

namespace cfgmask {

// Clears, in `action` (the table `lr` views: num_states * num_terminals,
// encoded as lr_core.h says), every action of a dead state and every shift
// into one.
void CloseDeadStates(const LrTables& lr, int32_t* action);

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_DEAD_STATES_H_
