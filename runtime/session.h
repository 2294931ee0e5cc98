// A decoding session over a CompiledStore: the generate() loop of the
// streamlining seed, made exact.
//
// The session holds a small set of live hypotheses, each a lexer state q at a
// token boundary (with the open slots' scanners and the carried column of
// the current terminal), an LALR(1) stack and the Python indenter's state.
// The mask of a step is the OR, over live hypotheses, of the store rows
// (q, S) whose item sequence S the hypothesis accepts: every Emit's terminal
// is in the scanner of the parser state where it is lexed and no blocker is,
// every Hit's terminal is absent from its slot's scanner, the indenter turns
// newlines into _NEWLINE/_INDENT/_DEDENT (or drops them inside brackets), and
// the parser shifts every resulting terminal.  EOS is allowed exactly when a
// hypothesis can end the text: its last terminal can end, the indenter
// closes its blocks, and the parser accepts $END.
//
// With the strict Python grammar (grammar/lark/python.lark), the session also
// runs its scope layer over the text (runtime/scope_layer.h): CPython's
// symbol-table checks, applied to Advance, the mask and EOS.
//
// A session is not thread-safe; the store it reads is, and may be shared by
// any number of sessions on any threads.  Tested by session_test.cc and the
// differential tests against Lark.
#ifndef CFGMASK_RUNTIME_SESSION_H_
#define CFGMASK_RUNTIME_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "maskstore/defaults.h"
#include "parser/lr_core.h"
#include "runtime/scope_layer.h"

namespace cfgmask {

struct LiveState {
  int32_t q = 0;
  int32_t col = 0;                   // column of the current terminal so far
  // Per open slot, the union of the alternation sets (terminal bitsets) of the
  // scanners where its merged boundaries happened: scanner_words each.
  std::vector<uint64_t> slot_bits;
  LrStack stack;                     // persistent: shared by forks and the history
  std::vector<int32_t> indent;       // indenter stack, starts {0}
  int32_t paren = 0;
  // With tracing on: the terminals fed to the parser so far (for tests).
  std::shared_ptr<const std::vector<int32_t>> trace;
};

// Everything of a hypothesis that decides its future (what later masks,
// steps and the end read): lexer state, column, slot scanners, parser stack,
// indenter stack and bracket depth; not the trace.  The column of the current
// terminal is read only by the indenter's newlines, so with `columns` false
// (a store without an indenter) it is left out.
bool SameFuture(const LiveState& a, const LiveState& b, bool columns = true);
bool SameFuture(const std::vector<LiveState>& a, const std::vector<LiveState>& b, bool columns);
// A hash of the same fields of every hypothesis, in order, from `seed`.
uint64_t FutureHash(const std::vector<LiveState>& live, uint64_t seed, bool columns);

// Is token t set in `mask` (ceil(V/32) words, bit t = token t)?
inline bool MaskAllows(const std::vector<uint32_t>& mask, int32_t t) {
  return (mask[t >> 5] >> (t & 31)) & 1u;
}

// ORs the token sets of store rows `rows[0..n)` into `mask` (the reference
// CPU reduction; runtime/batch.h has the batched and CUDA ones).
void OrRows(const CompiledStore& store, const int32_t* rows, size_t n, uint32_t* mask);

struct SessionLimits {
  int32_t max_live_states = defaults::kMaxLiveStates;  // per step; more is an error (kResourceLimit)
  // Bytes of the session's own row memo (runtime/row_memo.h): the rows a
  // hypothesis accepts, keyed by exactly what checking them reads, so a
  // context met again costs one look-up.  Shared by the session's forks and
  // kept by Reset.  0 turns it off.  Ignored when the session is given a
  // memo to share.
  int64_t memo_bytes = defaults::kSessionMemoBytes;
  // The row walk keeps, per row, the prefix it shares with the row before
  // it up to this many items (0-255, RowPrefixes); a longer one is read from
  // the sequences.  0 reads every one (the walk's reference in the tests).
  int32_t row_prefix_cap = 255;
};

// The rows of a root are sorted by item sequence; a row's walk needs the
// length of the prefix it shares with the row before it (which of the
// walk's simulations it keeps, and whether it lies under a prefix the parser
// rejected) and whether the next row goes on from it whole.  Read from the
// sequences, that cost a load of every row's items, the rows under a
// rejected prefix included (the walk's largest own share of a memo miss in
// `perf`); here it is a byte per row, computed on a root's first walk and
// capped at cap() (a longer shared prefix is read from the sequences).
// Each root is published once (an atomic pointer): sessions that share it
// by Fork may walk on other threads.  Compared with the sequences on every
// root, and the walk with it against the walk reading every prefix (cap 0),
// in tests/row_check_test.cc (RowPrefixes).
class RowPrefixes {
 public:
  static constexpr int32_t kCap = 255;
  RowPrefixes(int32_t roots, int32_t cap = kCap);
  RowPrefixes(const RowPrefixes&) = delete;
  RowPrefixes& operator=(const RowPrefixes&) = delete;
  ~RowPrefixes();
  int32_t cap() const { return cap_; }
  // Bytes of the tables made so far (a byte per row of each root walked).
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // For each row r of `root`, at [r - root_row_offsets[root]]: the length of
  // the prefix its sequence shares with row r - 1's (0 for the root's first
  // row), at most cap().
  const uint8_t* For(const CompiledStore& s, int32_t root);
  // The prefix row r's sequence shares with row r - 1's, at most `cap`.
  static int32_t Shared(const CompiledStore& s, int32_t r, int32_t cap);

 private:
  int32_t roots_, cap_;
  std::unique_ptr<std::atomic<uint8_t*>[]> at_;
  std::atomic<int64_t> bytes_{0};
};

class RowMemo;
class SuffixQuotient;

// Which middle layer an exact suffix's quotient uses (runtime/suffix_quotient.h).
// Both are exact (tests/suffix_quotient_test.cc compares each with a
// breadth-first search for a middle); they differ in size and speed.
enum class SuffixMiddle : int32_t {
  kBytes = 0,      // the byte-level middle; past its limits, prefix masks
  kTerminals = 1,  // the terminal-level middle (smaller and faster where both fit)
  // The session's default: where the byte-level middle fits its limits
  // (SuffixQuotient::Fits, counted in milliseconds before any saturation),
  // the terminal-level one is built, and the byte-level one if that goes
  // past the limits; elsewhere prefix masks, at Fits' cost.
  kAuto = 2,
};

// What AcceptedRows did, summed over the calls since it was attached
// (Session::set_counters): a research statistic (`cfgmask reduction`,
// `cfgmask bench`), off by default.  Counted in locals and added once per
// call, so the walk itself pays nothing; with a row memo, a hit checks
// nothing and counts nothing.  FillMask adds its filter's time (two reads of
// the monotonic clock, only in a session that has a filter).
struct StepCounters {
  int64_t calls = 0;
  int64_t parser_checks = 0;   // item checks on the incremental parser (HypothesisParser::Item)
  int64_t rows_visited = 0;    // rows whose sequence was walked (not skipped by a rejected prefix)
  int64_t rows_accepted = 0;   // rows ORed into the mask
  int64_t simulated = 0;       // simulated tokens walked (CompiledStore::sim_token)
  int64_t filter_ns = 0;       // FillMask's filter (scope layer, exact suffix), wall ns
  int64_t reductions = 0;      // parser reductions the row checks made (ChainMemo::reductions)
};

class Session {
 public:
  // With `memo`, the session uses that row memo (made for the same store),
  // shared with every other session given it: a server that opens a
  // session per request keeps one memo per store.
  explicit Session(const CompiledStore* store, SessionLimits limits = {},
                   std::shared_ptr<RowMemo> memo = nullptr);

  // Fills `mask` (ceil(V/32) words; bit t set = token t allowed).
  void FillMask(uint32_t* mask);
  // Clears, in a mask ORed from AcceptedRows, the tokens the store's semantic
  // layer refuses (the strict Python grammar's scope checks,
  // runtime/scope_layer.h), and with an exact suffix (suffix_exact()) the
  // tokens after which no middle meets the suffix; FillMask does it itself.
  // Free when the store has no layer, no check is pending and no suffix is
  // set.
  void FilterMask(uint32_t* mask) const;
  // FilterMask as a list, for a mask ORed elsewhere (the CUDA batch path,
  // runtime/cuda_batch.h): when the filter clears a set of tokens that does
  // not depend on the rest of the mask and is cheap to list (no check armed
  // at the word being written, no exact suffix), fills `clears` with the
  // tokens it would clear from a full mask and returns true; FilterMask(m)
  // is then m with those bits cleared.  Returns false when the filter needs
  // the mask itself (the caller then fills the row with FillMask).
  bool FilterClears(std::vector<int32_t>* clears) const;
  std::vector<uint32_t> Mask() {
    std::vector<uint32_t> m(store_->mask_words());
    FillMask(m.data());
    return m;
  }
  // The store rows whose item sequences this step accepts (ids into the
  // store's row arrays, in store order) and whether EOS is allowed: the mask
  // is the OR of those rows, plus the EOS ids.
  void AcceptedRows(std::vector<int32_t>* rows, bool* eos);
  // True if the text so far is a complete program; with a suffix, if the
  // text so far followed by the suffix is.
  bool CanEnd();
  // Completion in the middle of a file: the text after the cursor.  From
  // now on EOS is allowed (CanEnd, the mask) only where the text so far
  // followed by `suffix` is a complete program: a copy of the hypotheses
  // reads the suffix, O(|suffix|) once per step (cached until the session
  // moves).  Where suffix_exact() (a grammar without the indenter or a
  // semantic layer, runtime/suffix_quotient.h), a token is allowed (mask,
  // Advance, AllowsSlow) only if some middle then meets the suffix: the
  // quotient is built here, once.  Elsewhere tokens are masked as a prefix
  // of the language: a text can wander where no completion meets the
  // suffix.  Empty: no suffix.  Kept by Reset and Rollback; shared by Fork.
  void SetSuffix(std::string suffix, SuffixMiddle middle = SuffixMiddle::kAuto);
  const std::string& suffix() const;
  bool suffix_exact() const { return quotient_ != nullptr; }
  const std::shared_ptr<SuffixQuotient>& suffix_quotient() const { return quotient_; }
  // Advances by a token.  An id out of range, or a token that leaves the
  // language, is an error and leaves the session unchanged.
  Status Advance(int32_t token);
  // Advances by raw bytes (teacher forcing of text not aligned to tokens).
  Status AdvanceBytes(std::string_view bytes);
  bool IsTerminated() const { return terminated_; }
  // Not ok once a mask met rows of the store file that are out of range (a
  // damaged file; the rows are checked per root on first use, see
  // CompiledStore::RootRowsOk): the mask left them out, and Advance fails.
  Status store_status() const;
  void Reset();

  // Undoes the last k successful Advance/AdvanceBytes calls (speculative
  // decoding).  O(k): each step keeps the previous hypotheses, whose parser
  // stacks are shared, not copied.  k larger than the history is an error.
  Status Rollback(int32_t k);
  int32_t HistoryLength() const { return history_len_; }
  // An independent copy (beam search, parallel sampling): O(live states);
  // the history is shared with the original, not copied.
  Session Fork() const { return *this; }
  // The longest text forced by the grammar from here (every other byte is
  // rejected and the text cannot end), up to `max_bytes`: what a server can
  // append without sampling.
  std::string JumpForwardString(int32_t max_bytes = 256) const;

  // Tracing (tests, debugging): the session keeps the sequence of terminals
  // it feeds to the parser (after the indenter: _NEWLINE, _INDENT, _DEDENT
  // included, %ignore'd ones not), O(length) per step.  TerminalTrace() is
  // that sequence for a complete text, end-of-input _DEDENTs included, $END
  // excluded; empty if the text cannot end here.
  void EnableTrace() { trace_ = true; }
  std::vector<int32_t> TerminalTrace() const;

  // Slow reference: is token t allowed?  (Advances a copy.)
  bool AllowsSlow(int32_t token);
  // Tests: with false, a text may end in a word that leads nowhere
  // (WordLeadsNowhere is not asked), so that the completion search can
  // prove such a prefix dead.  On by default; kept by Fork.
  void set_dead_word_check(bool on) { dead_word_check_ = on; }
  size_t num_live() const { return live_.size(); }
  const CompiledStore* store() const { return store_; }
  // Look-ups its row memo answered and missed so far (all the sessions that
  // share it counted); null when the memo is off.
  const std::shared_ptr<RowMemo>& memo() const { return memo_; }
  // The scope layer over the text so far; null when the store has none.
  const ScopeLayer* scope_layer() const { return scope_.get(); }
  // The row prefix table this session walks with: its memo's (shared by
  // every session of that memo) at the default cap, else its own.
  const RowPrefixes* row_prefixes() const { return row_prefixes_.get(); }
  int64_t memo_hits() const;
  int64_t memo_misses() const;
  const std::vector<LiveState>& live() const { return live_; }
  // Counts what AcceptedRows (and so FillMask) does into `c` from now on;
  // null stops counting.  Not shared by Fork.
  void set_counters(StepCounters* c) { counters_ = c; }
  const std::string& text() const { return text_; }

 private:
  // Can hypothesis `s` end the text here?  With `trace`, also the terminals
  // fed to the parser up to the end ($END excluded).
  bool FinishOk(const LiveState& s, std::vector<int32_t>* trace = nullptr) const;
  Status AdvanceOne(const std::vector<LiveState>& in, std::string_view bytes,
                    std::vector<LiveState>* out) const;
  // Appends the rows of the simulated tokens of `root` that hypothesis `l`
  // can read (CompiledStore::sim_token).
  // With `low`, lowers it to the deepest index of l.stack read.
  void CheckSimulated(const LiveState& l, int32_t root, std::vector<int32_t>* rows,
                      size_t* low) const;

  const CompiledStore* store_;
  SessionLimits limits_;
  std::vector<LiveState> live_;
  // The scope layer over the text so far, when the store's grammar asks for
  // it (ScopeTokenIndex::Wanted); null otherwise.  Immutable: a step makes a
  // new one, the history and forks share the old ones.
  std::shared_ptr<const ScopeLayer> scope_;
  std::shared_ptr<const ScopeTokenIndex> scope_index_;
  // The layer after `bytes`, or null if it refuses them (ok when no layer).
  bool ScopeAfter(std::string_view bytes, std::shared_ptr<const ScopeLayer>* out) const;
  // After a text that the hypotheses `live` and the layer `layer` have read:
  // is its last word a proper prefix of `async` whose only completions the
  // lexer and parser still take are the keyword `async`, which the layer
  // refuses there (ScopeLayer::RefusesAsyncAhead: `[x as` outside an async
  // function)?  Such a text has no completion: a dead end, refused by
  // Advance, AdvanceBytes, AllowsSlow and the mask.  It never refuses a word
  // that can still complete: a word that more name bytes can make a keyword
  // the parser takes (`as` inside `with (`, `a` -> `and`), or a name, stands,
  // and so does any word past the search's limits (64 nodes, 12 more
  // letters; keywords have at most 8).
  bool WordLeadsNowhere(const std::vector<LiveState>& live, const ScopeLayer& layer) const;
  // Clears in `mask` the tokens after which WordLeadsNowhere holds (only the
  // few ScopeLayer::AsyncPrefixCandidates lists, each on a copy).
  void ClearWordsLeadingNowhere(uint32_t* mask) const;
  // The history is a persistent list: a step pushes a node in O(1), Fork
  // shares the list, Rollback(k) walks k nodes.  Released iteratively, so a
  // long history cannot overflow the stack.
  struct Saved {
    std::vector<LiveState> live;
    std::shared_ptr<const ScopeLayer> scope;
    size_t text_size = 0;
    bool terminated = false;
    std::shared_ptr<Saved> prev;
    ~Saved();
  };
  void PushHistory(std::vector<LiveState> live);
  std::shared_ptr<Saved> history_;
  int32_t history_len_ = 0;
  std::string text_;
  bool terminated_ = false;
  bool store_damaged_ = false;
  // No text is in the language: the start state has no action left (see
  // PruneUnlexableLookaheads in maskstore/scanner_tables.cc); every mask is
  // empty, ignored text included.
  bool empty_language_ = false;
  bool trace_ = false;
  bool dead_word_check_ = true;
  // The suffix (shared by forks) and CanEnd's answer for it, valid while
  // version_ (bumped by every change of live_, scope_ or terminated_) is unchanged.
  std::shared_ptr<const std::string> suffix_;
  std::shared_ptr<SuffixQuotient> quotient_;  // null: the suffix's masks are prefix masks
  // Can one of `out` (hypotheses after a token) still meet the suffix?
  bool MeetsSuffix(const std::vector<LiveState>& out) const;
  bool SuffixEnds();
  // Reads of the suffix that met the same hypotheses at the same offset end
  // the same way: at the start of a read and every 16 bytes of it, the
  // hypotheses (canonical: sorted and deduplicated) are kept with the read's
  // answer, so a later step whose read meets them there stops (at the start:
  // a text whose future is one already asked about, as the completion search
  // meets among a node's children; later: typically once the suffix's next
  // statement has begun).  Exact: the rest of a read depends on nothing
  // else.  Per session: a copy (Fork) starts empty; cleared at 2^16 entries.
  struct SuffixMemo {
    SuffixMemo() = default;
    SuffixMemo(const SuffixMemo&) {}
    SuffixMemo& operator=(const SuffixMemo&) {
      at.clear();
      entries = 0;
      return *this;
    }
    std::unordered_map<uint64_t, std::vector<std::pair<std::vector<LiveState>, bool>>> at;
    size_t entries = 0;
  };
  SuffixMemo suffix_memo_;
  uint64_t version_ = 0;
  uint64_t suffix_answer_version_ = ~uint64_t{0};
  bool suffix_answer_ = false;
  std::vector<int32_t> scratch_rows_;
  std::vector<uint32_t> text_mask_;  // non-special tokens, for complement rows
  std::shared_ptr<RowMemo> memo_;    // null when SessionLimits::memo_bytes is 0
  // Per root, what each row shares with the row before it (session.cc's
  // RowPrefixes), filled as roots are first walked; shared by Fork, and at
  // the default cap by every session of the same memo (RowMemo::row_prefixes).
  std::shared_ptr<RowPrefixes> row_prefixes_;
  StepCounters* counters_ = nullptr;
};

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_SESSION_H_
