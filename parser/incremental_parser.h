// The tests' reference LALR(1) parser: Lark's InteractiveParser
// (lark/parsers/lalr_interactive_parser.py, lalr_parser_state.py) over our
// ParseTables, on the LR core (parser/lr_core.h).
//
// Accepts(t) answers "would t be shifted?" by simulating the reductions t
// triggers on a scratch overlay (LrScratch), without touching the stack or
// the heap; Consume(t) commits the same simulation.  The state stack is an
// LrStack: a copy is O(1) and configurations can be memoised by value
// (operator==, Hash(): equal stacks compare and hash equal however they were
// built).
//
// $END is never pushed: AcceptsEnd() (= Accepts(end_terminal)) says whether
// the input may end here, i.e. whether the reductions on $END reach the end
// state, where Lark's parser returns; Consume(end_terminal) only reports it.
// A cyclic grammar (A =>+ A) whose reductions on a terminal never end has
// that terminal rejected (LrScratch's cycle check), where Lark's parser hangs.
//
// Thread safety: const methods may run concurrently; copies may be made and
// destroyed on different threads (the reference counts are atomic).
// Tested by incremental_parser_test.cc.
#ifndef CFGMASK_PARSER_INCREMENTAL_PARSER_H_
#define CFGMASK_PARSER_INCREMENTAL_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "parser/lalr.h"
#include "parser/lr_core.h"

namespace cfgmask {

class IncrementalParser {
 public:
  // `tables` must outlive the parser and its copies.
  explicit IncrementalParser(const ParseTables* tables, int start_index = 0)
      : tables_(tables), lr_(LrTables::Of(*tables)), stack_(tables->start_state.at(start_index)) {}

  // True iff `terminal` (a grammar terminal id, or end_terminal) would be
  // shifted (for end_terminal: accepted) after the reductions it triggers.
  bool Accepts(int32_t terminal) const;
  // Performs the reductions and the shift of `terminal`; returns false and
  // leaves the parser unchanged when it is not accepted.
  bool Consume(int32_t terminal);
  bool AcceptsEnd() const { return Accepts(lr_.end_terminal()); }

  int32_t State() const { return stack_.Top(); }
  // Number of states on the stack, the start state included.
  size_t Depth() const { return stack_.Depth(); }
  // The stack from bottom (the start state) to top.
  std::vector<int32_t> StateStack() const { return stack_.States(); }
  const LrStack& stack() const { return stack_; }
  const ParseTables* tables() const { return tables_; }

  bool operator==(const IncrementalParser& other) const {
    return tables_ == other.tables_ && stack_ == other.stack_;
  }
  bool operator!=(const IncrementalParser& other) const { return !(*this == other); }
  uint64_t Hash() const { return stack_.Hash(); }

  // "[0 5 12]": the state stack, bottom first.
  std::string DebugString() const { return stack_.DebugString(); }

 private:
  const ParseTables* tables_;
  LrTables lr_;
  LrStack stack_;
};

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_INCREMENTAL_PARSER_H_
