// The runtime's LALR(1) parser: Lark's InteractiveParser
// (lark/parsers/lalr_interactive_parser.py, lalr_parser_state.py) over our
// ParseTables, reduced to what constrained decoding asks of it.
//
// Accepts(t) answers "would t be shifted?": it simulates the reductions t
// triggers on a scratch overlay above the shared stack, on the C++ stack,
// without touching the heap (an LALR table may reduce on a terminal that then
// fails, so the answer needs the simulation, as Lark's accepts() does on a
// copy).  Consume(t) commits the same simulation.  The state stack is
// persistent: immutable reference-counted nodes shared between copies, so a
// copy is O(1) and configurations can be memoised by value (operator==,
// Hash(): equal stacks compare and hash equal however they were built).
//
// $END is never pushed: AcceptsEnd() (= Accepts(end_terminal)) says whether
// the input may end here, i.e. whether the reductions on $END reach the end
// state, where Lark's parser returns; Consume(end_terminal) only reports it.
//
// Thread safety: const methods may run concurrently; copies may be made and
// destroyed on different threads (the reference counts are atomic).
// Tested by incremental_parser_test.cc.
#ifndef CFGMASK_PARSER_INCREMENTAL_PARSER_H_
#define CFGMASK_PARSER_INCREMENTAL_PARSER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "parser/lalr.h"

namespace cfgmask {

class IncrementalParser {
 public:
  // `tables` must outlive the parser and its copies.
  explicit IncrementalParser(const ParseTables* tables, int start_index = 0);
  IncrementalParser(const IncrementalParser& other);
  IncrementalParser(IncrementalParser&& other) noexcept;
  IncrementalParser& operator=(const IncrementalParser& other);
  IncrementalParser& operator=(IncrementalParser&& other) noexcept;
  ~IncrementalParser();

  // True iff `terminal` (a grammar terminal id, or end_terminal) would be
  // shifted (for end_terminal: accepted) after the reductions it triggers.
  bool Accepts(int32_t terminal) const {
    const int32_t action = action_[static_cast<size_t>(top_->state) * num_terminals_ + terminal];
    if (action > 0) return true;
    if (action == 0) return false;
    return AcceptsAfterReductions(terminal);
  }
  // Performs the reductions and the shift of `terminal`; returns false and
  // leaves the parser unchanged when it is not accepted.
  bool Consume(int32_t terminal);
  bool AcceptsEnd() const;

  int32_t State() const { return top_->state; }
  // Number of states on the stack, the start state included.
  size_t Depth() const { return top_->depth; }
  // The stack from bottom (the start state) to top.
  std::vector<int32_t> StateStack() const;
  const ParseTables* tables() const { return tables_; }

  bool operator==(const IncrementalParser& other) const;
  bool operator!=(const IncrementalParser& other) const { return !(*this == other); }
  uint64_t Hash() const { return top_->hash; }

  // "[0 5 12]": the state stack, bottom first.
  std::string DebugString() const;

 private:
  struct Node {
    int32_t state;
    uint32_t depth;
    uint64_t hash;
    Node* parent;
    std::atomic<uint32_t> refs;
  };
  enum class Outcome { kReject, kShift, kAccept, kOverflow };
  // Where a simulation ends: the shared nodes below `base` stay, the
  // `overlay_size` states of the overlay sit above it, then `shift_state`.
  struct Cursor {
    const Node* base;
    int32_t overlay_size;
    int32_t shift_state;
  };

  static Node* NewNode(int32_t state, Node* parent);
  static void Retain(const Node* node);
  static void Release(const Node* node);

  bool AcceptsAfterReductions(int32_t terminal) const;
  Outcome Simulate(int32_t terminal, int32_t* overlay, int32_t capacity, Cursor* cursor) const;
  // Simulate on `inline_overlay` (kInlineOverlay states, on the caller's
  // C++ stack), moving to `spill` on the heap only for the rare reduction
  // chains that push more states than that; `*overlay` is the one used.
  Outcome Run(int32_t terminal, int32_t* inline_overlay, std::vector<int32_t>* spill,
              Cursor* cursor, const int32_t** overlay) const;

  static constexpr int32_t kInlineOverlay = 64;

  const ParseTables* tables_;
  const int32_t* action_;
  int32_t num_terminals_;
  Node* top_;
};

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_INCREMENTAL_PARSER_H_
