// The terminal automaton (streamlining seed, figure 1), made exact for Lark's
// contextual lexer.
//
// Lark lexes with one Python regex per parser state: the alternation, in a
// fixed global order, of the terminals that state accepts (plus %ignore and
// the post-lexer's always-accepted ones), minus the keyword strings that a
// regexp terminal of the same priority matches in full ("embedded" strings,
// which that regexp's "unless" callback retypes instead).  The winner at a
// position is the first terminal in that order that matches at all; its length
// is its own leftmost-first (backtracking) match.  Both depend on text beyond
// the terminal's end, and the alternation depends on the parser state.
//
// A lexer state q is therefore scanner-independent:
//  - for every terminal, the priority-ordered list of its live NFA threads and
//    match markers since the start of the current terminal (per-terminal
//    states, hash-consed, each with its own lazily built byte transitions);
//  - "shadows" of terminal boundaries already taken: for the terminal that
//    ended, the entries that must not win later (its higher-priority threads,
//    its pending negative lookaheads); for every terminal earlier in the
//    order, its whole list, which must never match (else it would have won).
// Whether a boundary is legal depends on the scanner, known only at run time
// from the parser state.  So a boundary emits an item Emit(T, blockers,
// full-match strings, column) and a later match of a blocking shadow emits
// Hit(slot, U); the runtime checks both against the scanner of the parser
// state where the boundary happened (see runtime/session.cc).  Everything
// else (which splits are possible, maximal munch, lazy quantifiers, lookahead
// across the terminal end) is decided here, exactly.
//
// Lexer modes: where no parser state scans two groups of terminals together
// (an f-string's text and the code around it; parser/lexer_modes.h), a state
// holds only its mode's terminals and the shared ones (%ignore'd, the
// indenter's newline), and a boundary starts the next terminal once per
// mode that can follow the one that ended, each a lexer state of its own:
// the next terminal's check against the parser discards the wrong ones, as
// for any other lexing.  Without that split a state would carry every
// hypothesis of both groups at once, and their product.
//
// Tested by vocab_walk_test.cc, lexer_modes_test.cc and the Lark differential
// tests.
#ifndef CFGMASK_LEXER_TERMINAL_AUTOMATON_H_
#define CFGMASK_LEXER_TERMINAL_AUTOMATON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/base/stop_check.h"
#include "grammar/grammar.h"
#include "grammar/lexer_modes.h"
#include "grammar/base/status.h"
#include "lexer/regex/regex.h"

namespace cfgmask {

// One item of a terminal sequence S produced by a token.
struct LexItem {
  enum Kind : uint8_t {
    kEmit,  // terminal `terminal` ended here
    kHit,   // the blocking shadow of `terminal` matched: the boundary in
            // `slot` is legal only if `terminal` is not in that scanner
    kTail,  // the token ends inside a terminal: one of the terminals in set
            // `blockers` (still able to end) must be scannable and accepted
            // by the parser after S, unless an earlier terminal of the scanner
            // already matched (set `full_match`: terminals with a match)
  };
  Kind kind = kEmit;
  int32_t terminal = -1;
  int32_t blockers = -1;   // kEmit: id of a terminal set (TerminalAutomaton::sets)
  int32_t full_match = -1; // kEmit: id of the set of string terminals equal to the text
  bool col_absolute = false;  // kEmit of the indenter's newline terminal:
  int32_t col = 0;            //   column = col (absolute) or carried + col
  // kHit: slot ordinal (see header comment).  kTail: -1, or the id of a
  // terminal set of which the scanner may hold none (the lexer mode's
  // foreign terminals: LexerModes::foreign), when a shared terminal is alive.
  int32_t slot = -1;

  bool operator==(const LexItem& o) const {
    return kind == o.kind && terminal == o.terminal && blockers == o.blockers &&
           full_match == o.full_match && col_absolute == o.col_absolute && col == o.col &&
           slot == o.slot;
  }
};

// Column bookkeeping of the current terminal's text, for the Python indenter
// (Lark's PythonIndenter): the number of spaces + 8 * tabs after the last
// '\n', or -1 while the terminal has no '\n' (Lark's indenter then fails:
// its newline token must contain one).  A delta is either absolute (a '\n'
// or the terminal's start was seen in this token) or relative to the column
// carried in from earlier tokens.
struct ColumnDelta {
  bool absolute = false;
  int32_t value = 0;
  static ColumnDelta TerminalStart() { return ColumnDelta{true, -1}; }
  void Feed(uint8_t b) {
    if (b == '\n') {
      absolute = true;
      value = 0;
    } else if ((b == ' ' || b == '\t') && (!absolute || value >= 0)) {
      value += b == ' ' ? 1 : 8;
    }
  }
  // The column, given the one carried in (-1: no newline yet).
  static int32_t Resolve(bool absolute, int32_t value, int32_t carried) {
    if (absolute) return value;
    return carried < 0 ? -1 : carried + value;
  }
};

struct TerminalAutomatonOptions {
  int32_t max_lexer_states = 2000000;  // resource bound on hash-consed states
  // Lexer modes (grammar/lexer_modes.h; parser/lexer_modes.h finds them in
  // the LALR tables): a lexer state holds only its mode's terminals and the
  // shared ones, and a boundary starts the next terminal in each mode that
  // can follow the one that ended (each its own lexer state): the parser's
  // check of the next terminal picks the right one.  Without modes
  // (num_modes 0) every terminal is live after every boundary.  A shared
  // terminal's Emit carries the mode's `foreign` terminals as blockers and
  // its Tail as `slot` (LexItem); once a regexp among the mode's `certain`
  // terminals has matched at a terminal's start, the terminals after it in
  // Lark's order are dropped (string terminals some regexp retypes to kept).
  LexerModes modes;
  // The compile's budget and interrupt (grammar/base/stop_check.h), looked at
  // per terminal and per pair of terminals while Build runs; null: none.
  StopCheck* stop = nullptr;
};

class TerminalAutomaton {
 public:
  // Builds the per-terminal NFAs and the global lexer order.  `indenter_nl`
  // is the terminal whose column the Python indenter reads (-1: none).
  static Status Build(const Grammar& grammar, int32_t indenter_nl,
                      const TerminalAutomatonOptions& options,
                      std::unique_ptr<TerminalAutomaton>* out);

  ~TerminalAutomaton();
  int32_t initial_state() const { return initial_; }
  int32_t num_states() const { return static_cast<int32_t>(states_.size()); }

  // One byte from lexer state q, without ending the current terminal first.
  // Returns -1 when every hypothesis dies; appends kHit items to `items`.
  int32_t Step(int32_t q, uint8_t byte, std::vector<LexItem>* items);

  // Step() if it was computed before, else -2 (never computes).  The
  // *IfComputed accessors only read, so any number of threads may call them
  // while no thread calls a computing one.
  int32_t StepIfComputed(int32_t q, uint8_t byte, std::vector<LexItem>* items) const;
  // The step of q on `byte` when it was computed and produces no items:
  // true and *to = the state (-1: rejected).  Else false.
  bool StepIfComputedWithoutItems(int32_t q, uint8_t byte, int32_t* to) const {
    const LexState& st = states_[q];
    if (st.step_to.empty()) return false;
    const int32_t r = st.step_to[byte];
    if (r == -2 || st.step_hits[byte] > 0) return false;  // -2: not computed
    *to = r;
    return true;
  }
  // The ASCII bytes 1..127 that q steps on to q itself with no items, among
  // the steps computed so far (bit b of out[b / 64]).  Read-only like
  // StepIfComputed.
  void ComputedSelfLoops(int32_t q, uint64_t out[2]) const;

  // The terminals that may end at the current position of q (non-empty text
  // and a match marker created here), in global lexer order.
  const std::vector<int32_t>& BoundaryCandidates(int32_t q);
  // BoundaryCandidates() if it was computed before, else nullptr.
  const std::vector<int32_t>* BoundaryCandidatesIfComputed(int32_t q) const {
    const LexState& st = states_[q];
    return st.candidates_done ? &st.candidates : nullptr;
  }

  // The lexer modes the next terminal can be lexed in when t ends in q
  // (sorted; {0} when the grammar has no modes).  Read-only.
  const std::vector<int32_t>& ModesAfter(int32_t q, int32_t t) const {
    return after_[static_cast<size_t>(states_[q].mode) * num_terminals_ + t];
  }
  int32_t num_modes() const { return num_modes_; }
  int32_t Mode(int32_t q) const { return states_[q].mode; }

  // Ends terminal t here and starts the next terminal in `mode` (one of
  // ModesAfter(q, t)): returns the new state (at the start of the next
  // terminal) and fills `emit` (its column left zero: the caller knows it).
  // Returns -1 if illegal.
  int32_t Boundary(int32_t q, int32_t t, int32_t mode, LexItem* emit);
  // Boundary() if it was computed before, else -2 (never computes).
  int32_t BoundaryIfComputed(int32_t q, int32_t t, int32_t mode, LexItem* emit) const;

  // The kTail item of a token that ends in state q (q not at a terminal start).
  LexItem Tail(int32_t q);

  // End of input at q: each alternative is a full item sequence (Hits from
  // open shadows, then the Emit of the last terminal unless q is at the
  // start of a terminal).  Empty result: the text cannot end here.
  struct EofAlternative {
    std::vector<LexItem> items;
  };
  std::vector<EofAlternative> EndOfInput(int32_t q);

  // Renumbers the open slots of q as 0..k-1 (their relative order kept).
  // `slot_map[i]` receives the old ordinal of new slot i.  Token transitions
  // end with this so that lexer states at token boundaries are canonical.
  int32_t CompactSlots(int32_t q, std::vector<int32_t>* slot_map);
  int32_t NumOpenSlots(int32_t q) const { return states_[q].num_slots; }
  bool AtTerminalStart(int32_t q) const { return states_[q].at_start; }

  // Terminal sets referenced by LexItems (sorted terminal ids).
  const std::vector<int32_t>& Set(int32_t id) const { return sets_[id]; }
  int32_t num_sets() const { return static_cast<int32_t>(sets_.size()); }
  int32_t InternSet(std::vector<int32_t> s);

  // Global lexer order: terminal ids sorted by Lark's key (-priority,
  // -max_width, -len(value), name); declared terminals are absent.
  const std::vector<int32_t>& order() const { return order_; }
  int32_t rank(int32_t t) const { return rank_[t]; }

  // unless_ok(r, k): r is a regexp terminal, k a string terminal of the same
  // priority, and r's Python match on k's text is the whole text.
  bool UnlessOk(int32_t r, int32_t k) const;
  // Lark also requires k.flags <= r.flags for k to be removed ("embedded").
  bool Embeds(int32_t r, int32_t k) const;
  bool IsStringTerminal(int32_t t) const { return is_string_[t]; }
  // Terminal t's pattern looks around (a negative look-ahead or a
  // look-behind): whether it matches at a position depends on text outside
  // its own match.
  bool LooksAround(int32_t t) const;
  bool IsLexed(int32_t t) const { return rank_[t] >= 0; }

  // Slow reference: Python's re.match of terminal t's pattern on `text`.
  int64_t MatchTerminal(int32_t t, const std::string& text) const;

  // What the lexer states are made of, to say what hit a state limit: per
  // terminal with a thread in some state, the number of its own thread
  // states (ordered NFA thread lists; a pattern whose threads multiply has
  // many) and of lexer states holding it live or as a shadow.  Sorted by
  // thread states, then lexer states, most first.
  struct TerminalCensus {
    int32_t terminal = -1;
    int64_t thread_states = 0;
    int64_t lexer_states = 0;
  };
  std::vector<TerminalCensus> Census() const;

  std::string DebugString(int32_t q) const;
  // One per-terminal state: its entries (thread pc / marker, flags, vetoes).
  std::string TerminalStateString(int32_t t, int32_t tstate) const;
  size_t MemoryBytes() const;

  // Steps of q computed so far: (byte, target, Hit items).  Used to freeze
  // the automaton into the store after the vocabulary walk.
  struct ComputedStep {
    uint8_t byte;
    int32_t to;
    std::vector<LexItem> hits;
  };
  std::vector<ComputedStep> ComputedSteps(int32_t q) const;

  // Implementation types, public only for the helpers in the .cc file.
  struct Entry;
  struct TermTable;

 private:
  struct ShadowRef {
    int32_t slot;
    int32_t terminal;
    int32_t tstate;
    uint8_t own;  // 1: the ended terminal's own shadow, 0: blocker
    bool operator==(const ShadowRef& o) const {
      return slot == o.slot && terminal == o.terminal && tstate == o.tstate && own == o.own;
    }
  };
  struct LexState {
    std::vector<std::pair<int32_t, int32_t>> cur;  // (terminal, tstate), global order
    std::vector<ShadowRef> shadows;                // sorted by (slot, rank)
    int32_t num_slots = 0;
    int32_t mode = 0;  // the lexer mode of the current terminal
    bool at_start = true;
    bool candidates_done = false;
    std::vector<int32_t> candidates;
    std::vector<int32_t> step_to;       // 256 entries, -2 = not computed yet
    std::vector<int32_t> step_hits;     // 256 entries, id into hit_lists_
  };

  TerminalAutomaton() = default;
  int32_t Intern(LexState st);
  std::string Key(const LexState& st) const;

  const Grammar* grammar_ = nullptr;
  int32_t num_terminals_ = 0;
  std::vector<Nfa> nfas_;
  std::vector<RegexWidth> widths_;
  std::vector<int32_t> order_, rank_;
  std::vector<uint8_t> is_string_;
  std::vector<std::vector<uint8_t>> unless_ok_, embeds_;
  std::vector<std::unique_ptr<TermTable>> tables_;
  std::vector<LexState> states_;
  std::unordered_map<std::string, int32_t> state_ids_;
  std::vector<std::vector<int32_t>> sets_;
  std::unordered_map<std::string, int32_t> set_ids_;
  std::vector<std::vector<LexItem>> hit_lists_;
  // (q << 32 | t << 8 | mode) -> emit id, -1: none
  std::unordered_map<uint64_t, int32_t> boundary_memo_;
  std::vector<std::pair<LexItem, int32_t>> boundary_emits_;
  int32_t BoundaryUncached(int32_t q, int32_t t, int32_t mode, LexItem* emit);
  static uint64_t BoundaryKey(int32_t q, int32_t t, int32_t mode) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(q)) << 32) |
           (static_cast<uint64_t>(static_cast<uint32_t>(t)) << 8) | static_cast<uint32_t>(mode);
  }
  int32_t num_modes_ = 1;
  // Per mode: the per-terminal lists at the start of a terminal.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> mode_start_;
  // [mode * num_terminals + t]: ModesAfter for a state in that mode.
  std::vector<std::vector<int32_t>> after_;
  std::vector<int32_t> foreign_set_;  // per mode: set id of its foreign terminals (-1: none)
  void AddForeignBlockers(int32_t mode, int32_t t, std::vector<int32_t>* blockers) const;
  std::vector<uint8_t> shared_;       // per terminal: in every mode
  std::vector<uint8_t> certain_;      // [mode * num_terminals + t]: LexerModes::certain
  std::vector<uint8_t> retype_target_;  // per terminal: a string some regexp retypes to
  int32_t initial_ = -1;
  int32_t max_states_ = 0;
  int32_t indenter_nl_ = -1;
};

}  // namespace cfgmask

#endif  // CFGMASK_LEXER_TERMINAL_AUTOMATON_H_
