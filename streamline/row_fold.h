// The merge pass of mask-store streamlining (seed, "is_never_legal" and
// "is_always_legal"), on a compiled store:
//  - a row (q, S) that no hypothesis can accept is deleted: after some Emit
//    of S, no parser configuration takes the rest of S;
//  - a row whose item sequence S = P R is accepted by every hypothesis that
//    accepts its prefix P is folded into the row (q, P).  Rows folded into
//    the same prefix merge, so the runtime asks the parser one question (P)
//    instead of one per row, and ORs one row.
//
// The proof is the seed's unlimited credit exploration, run on the LALR(1)
// tables the runtime uses and extended from terminal sequences to the
// store's item sequences (lexer/terminal_automaton.h): P ends with an Emit of
// a terminal X; exploration starts from every LR state that shifting X (or a
// keyword X can be retyped to) can enter, with nothing known below it.
// Along R it checks, for the known top state, each item exactly as the
// runtime would: an Emit's terminal in the contextual scanner and none of its
// blockers, the keyword retyping it gets there, the reductions and shift it
// triggers; a Hit against the scanner of an Emit made inside R; a Tail by
// some terminal still able to end that the parser takes.  A reduction that
// pops below the known stack borrows every LR state with a path to it (all
// must succeed).  Items whose outcome depends on what the exploration does
// not know (the indenter's stack for a newline, the scanner of a boundary
// before R) make the proof fail, so a fold is only ever a proved one.
//
// Deletion runs the same exploration with "some branch" for "every branch"
// and counts what it does not know as possible, so a row is deleted only
// when no configuration at all can take it.
//
// Masks are therefore bit-identical with and without the pass; tests check
// that on teacher-forced corpora and random walks (streamline_store_test.cc).
#ifndef CFGMASK_STREAMLINE_ROW_FOLD_H_
#define CFGMASK_STREAMLINE_ROW_FOLD_H_

#include <cstdint>

#include "grammar/status.h"
#include "maskstore/compiled_store.h"

namespace cfgmask {

struct StreamlineOptions {
  bool delete_never = true;     // delete rows no hypothesis can accept
  bool fold = true;             // fold proved always-legal suffixes into their prefix
  int32_t max_stack = 8;        // known part of the parse stack kept by the exploration
  int64_t max_steps = 50000;    // exploration budget per query; beyond it: not proved
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
  double seconds = 0;
};

// Rewrites the store's rows in place.  Idempotent.
Status StreamlineStore(CompiledStore* store, const StreamlineOptions& options,
                       StreamlineStats* stats);

}  // namespace cfgmask

#endif  // CFGMASK_STREAMLINE_ROW_FOLD_H_
