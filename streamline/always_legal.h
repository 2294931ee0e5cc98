// is_always_legal (seed, "Unlimited credit exploration"), on the LALR(1)
// tables through the one exploration of streamline/exploration.h:
//
//  - AlwaysLegalStep, the streamlining step on a compiled store: a row whose
//    item sequence S = P R is accepted by every hypothesis that accepts its
//    prefix P (P ending with an Emit) is folded into the row (q, P).  Rows
//    folded into the same prefix merge, so the runtime asks the parser one
//    question (P) instead of one per row, and ORs one row.
//  - LrAlwaysLegalAnalysis, the same question on plain terminal sequences:
//    is every viable prefix ending in terminal x continued by s?  (Tests and
//    research queries; tests/reference/symbol_always_legal.h is the seed's
//    own construction on grammar symbols, kept as a reference.)
//
// Both answer true only with a proof; false means "not proved".
// Tested by always_legal_test.cc (the seed's a^n b^n example and a
// brute-force soundness check on random small grammars) and
// streamline_store_test.cc (masks identical with and without the step).
#ifndef CFGMASK_STREAMLINE_ALWAYS_LEGAL_H_
#define CFGMASK_STREAMLINE_ALWAYS_LEGAL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "maskstore/compiled_store.h"
#include "parser/lalr.h"
#include "streamline/exploration.h"

namespace cfgmask {

struct AlwaysLegalOptions {
  int32_t max_stack = 6;       // known part of the parse stack kept
  int32_t max_nodes = 200000;  // exploration steps per query; beyond them: not proved
};

struct AlwaysLegalStats {
  int64_t queries = 0;
  int64_t proved = 0;
  int64_t nodes = 0;           // exploration steps (or NFA nodes), summed over queries
  int64_t budget_exceeded = 0; // queries that hit the budget
  double seconds = 0;
};

class LrAlwaysLegalAnalysis {
 public:
  // `tables` must be BuildParseTables(grammar) and outlive this object.
  LrAlwaysLegalAnalysis(const Grammar& grammar, const ParseTables& tables, int start_index,
                        AlwaysLegalOptions options = {});

  // True only if every viable prefix ending in x can be continued by s.
  bool IsAlwaysLegal(int32_t x, std::span<const int32_t> s);
  const AlwaysLegalStats& stats() const { return stats_; }

 private:
  int32_t num_grammar_terminals_;
  TerminalExploration exploration_;
  AlwaysLegalStats stats_;
};

// The folding step: FoldLength(seq) is the length of the prefix sequence
// `seq` folds into (its own length when nothing is proved).  Each proof
// folds into the shortest proved prefix, then that prefix is folded again
// (each step is exact, so their chain is).  Queries are cached by suffix.
class AlwaysLegalStep {
 public:
  AlwaysLegalStep(const CompiledStore& store, ItemExploration* exploration)
      : s_(store), x_(exploration) {}
  int32_t FoldLength(int32_t seq);
  const StepQueries& counts() const { return answers_.counts(); }
  // Frees the cached answers (counts() stays).
  void Release() { answers_.Release(); }

 private:
  const CompiledStore& s_;
  ItemExploration* x_;
  SuffixAnswers answers_;
  std::vector<int32_t> suffix_;  // SuffixIds of the sequence asked about
};

}  // namespace cfgmask

#endif  // CFGMASK_STREAMLINE_ALWAYS_LEGAL_H_
