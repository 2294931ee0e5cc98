// Mask-store streamlining (seed, figure 6) as a pass of named steps over a
// compiled store, each with its statistics:
//
//  1. every lexing: the store as built, one row per (root, item sequence);
//  2. lexing conditions: in every row's sequence, the lexing conditions no
//     parser state's scanner can fail are dropped (a Hit of a terminal in no
//     scanner's alternation; an Emit's blockers and keyword retypings that
//     never share a scanner with its terminal; a column no newline reads),
//     and rows whose sequences become equal merge;
//  3. never legal (streamline/never_legal.h, NeverLegalStep): a row that no
//     hypothesis can accept is deleted;
//  4. always legal (streamline/always_legal.h, AlwaysLegalStep): a row whose
//     sequence S = P R is accepted by every hypothesis that accepts P is
//     folded into the row (q, P); rows folded into the same prefix merge;
//  5. shared row groups: lexer states whose row groups are equal (the same
//     item sequences with the same token sets, the same simulated tokens)
//     share one group (CompiledStore::root_index); the runtime walks a group
//     from the hypothesis's own state, so masks cannot change;
//  6. interchangeable terminals (streamline/interchangeable.h): the classes
//     are reported (with StreamlineOptions::grammar), not applied: merging
//     them changes the store's keys.
//
// Both row steps ask the one exploration of streamline/exploration.h, on the
// LALR(1) tables through the LR core, extended from terminal sequences to
// the store's item sequences (lexer/terminal_automaton.h).  A fold is only
// ever a proved one and a deletion only ever a refuted one, so masks are
// bit-identical with and without the pass; tests check that on
// teacher-forced corpora and random walks (streamline_store_test.cc).
#ifndef CFGMASK_STREAMLINE_STREAMLINE_H_
#define CFGMASK_STREAMLINE_STREAMLINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/base/status.h"
#include "grammar/base/stop_check.h"
#include "grammar/grammar.h"
#include "maskstore/compiled_store.h"
#include "maskstore/defaults.h"

namespace cfgmask {

struct StreamlineOptions {
  bool delete_never = true;     // delete rows no hypothesis can accept
  bool fold = true;             // fold proved always-legal suffixes into their prefix
  bool lexing_conditions = true;  // drop lexing conditions no scanner can fail; merge equal rows
  bool share = true;            // lexer states with equal row groups share one
  int32_t max_stack = defaults::kExplorationMaxStack;  // known part of the parse stack kept
  int64_t max_steps = defaults::kExplorationMaxSteps;  // budget per query; beyond it: not proved
  // Bytes each step's exploration memo may hold; past it, the memo is emptied
  // before the step's next row (so the store is the same for any thread count).
  int64_t memo_bytes = defaults::kExplorationMemoBytes;
  // Threads (0: every core): above one, the always-legal step runs beside
  // the never-legal one, a row behind it (the results do not depend on it).
  int32_t num_threads = defaults::kNumThreads;
  // When set (the grammar the store was compiled from), the interchangeable
  // step reports its classes.
  const Grammar* grammar = nullptr;
  // The compile's budget and interrupt (grammar/base/stop_check.h), polled
  // per row of the never- and always-legal steps and between steps, on the
  // calling thread only; null: none.  When it stops the pass, the store is
  // left half streamlined: the caller discards it.
  StopCheck* stop = nullptr;
};

// One named step of the pass: the rows and row payload bytes after it.
struct StreamlineStep {
  std::string name;           // "every lexing", "lexing conditions", "never legal", "always legal", "shared row groups", "interchangeable"
  int64_t rows = 0, bytes = 0;
  // The rows as the seed keys them: per lexer state at a token boundary
  // (not per shared row group), the distinct terminal sequences of its rows
  // (TerminalSequenceKeys: Hit items, columns and blocker sets dropped).
  int64_t keys = 0;
  int32_t groups = 0;         // row groups (CompiledStore::num_roots) after the step
  int64_t queries = 0;        // explorations run by the step (after its cache)
  double seconds = 0;
  // Row payloads (token sets) the store holds after the step: rows are
  // references and equal payloads are stored once (maskstore/row_codec.h).
  int64_t payloads = 0;
};

struct StreamlineStats {
  int64_t rows_before = 0, rows_after = 0;
  int64_t bytes_before = 0, bytes_after = 0;  // row payload bytes (ids + bitset words)
  int64_t never_queries = 0; // (Emit, suffix) refutations attempted (after the cache)
  int64_t rows_deleted = 0;  // rows no hypothesis can accept
  int64_t queries = 0;       // (Emit, suffix) proofs attempted (after the cache)
  int64_t proved = 0;        // rows folded
  int64_t cache_hits = 0;
  int64_t budget_exceeded = 0;
  int32_t groups_shared = 0; // row groups merged into an equal one
  int64_t items_canonical = 0;  // items whose lexing conditions were simplified or dropped
  double seconds = 0;
  std::vector<StreamlineStep> steps;  // in order, "every lexing" first
  // Interchangeable terminals (terminal ids, classes of two or more); only
  // with StreamlineOptions::grammar.
  std::vector<std::vector<int32_t>> interchangeable;
};

// Rewrites the store's rows in place.  Idempotent.
Status StreamlineStore(CompiledStore* store, const StreamlineOptions& options,
                       StreamlineStats* stats);

// The compile's streamlining phase: StreamlineStore with options.grammar set
// to `grammar`, which this phase owns and releases before it returns (the
// interchangeable step is the grammar's last user in a compile).
Status StreamlineCompiledStore(CompiledStore* store, std::unique_ptr<const Grammar> grammar,
                               const StreamlineOptions& options, StreamlineStats* stats);

}  // namespace cfgmask

#endif  // CFGMASK_STREAMLINE_STREAMLINE_H_
