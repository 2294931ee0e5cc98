// The vocabulary walk of the compile (runtime/compile/compile.h) and the store it
// yields: from every lexer state q found at a token boundary (a root), the
// vocabulary trie is walked once in depth-first order through the terminal
// automaton, filling nfa_transition and the mask-store rows (streamlining
// seed, section 2: mask_store[(q, S)] = tokens whose walk from q yields the
// terminal sequence S); lexer states where tokens end are new roots, until
// no new one appears.  Then the automaton, as far as the walk computed it,
// is frozen into the store.
//
// The walks of different roots are independent and run in parallel (oneTBB)
// against the lazily built automaton read-only; transitions a walk misses
// are computed serially between passes, in root order, so the store's bytes
// do not depend on the thread count (details in vocab_walk.cc).
// Run by the compile driver (runtime/compile/compile.cc) with its own options
// (WalkOptions).  Tested by vocab_walk_test.cc.
#ifndef CFGMASK_MASKSTORE_VOCAB_WALK_H_
#define CFGMASK_MASKSTORE_VOCAB_WALK_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/base/status.h"
#include "lexer/terminal_automaton.h"
#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"
#include "maskstore/defaults.h"

namespace cfgmask {

// One nfa_transition entry: the token `token` read from root `root` (index
// into WalkRecord::roots) can end in lexer state `to` (after slot
// compaction, a root itself) having produced `items` (the last one the Tail
// of the state before compaction).
struct NfaTransitionEntry {
  int32_t root;
  int32_t token;
  int32_t to;
  std::vector<LexItem> items;
};

// Tests only: what a compile walked (CompileOptions::record).
struct WalkRecord {
  bool keep_impossible_pairs = false;  // in: no pruning of Emit pairs by FOLLOW
  std::shared_ptr<TerminalAutomaton> automaton;  // out: as left by the compile
  std::vector<int32_t> roots;                    // out: lexer state of each root
  int32_t indenter_nl = -1;                      // out: -1 without indenter
  std::vector<uint8_t> ignored;                  // out: per terminal
  std::vector<NfaTransitionEntry> entries;       // out: in root order, then walk order
};

// The walk's own options (the compile's, runtime/compile/compile.h CompileOptions,
// explain each); exceeding a limit stops the walk with kResourceLimit.
struct WalkOptions {
  int32_t max_lexer_states = defaults::kMaxLexerStates;
  int32_t max_roots = defaults::kMaxRoots;
  int64_t max_store_entries = defaults::kMaxStoreEntries;
  int64_t max_store_rows = defaults::kMaxStoreRows;
  double max_seconds = defaults::kMaxSeconds;  // 0: no deadline (else VocabularyWalkInput::deadline)
  int32_t max_walk_hypotheses = defaults::kMaxWalkHypotheses;
  int64_t walk_memo_bytes = defaults::kWalkMemoBytes;
  bool prune_pairs = defaults::kPrunePairs;
  int32_t num_threads = defaults::kNumThreads;
  WalkRecord* record = nullptr;
};

struct VocabularyWalkInput {
  std::string grammar_path;  // named in error messages
  WalkOptions options;
  const Grammar* grammar = nullptr;  // its FOLLOW prunes impossible terminal pairs
  int32_t indenter_nl = -1;          // _NEWLINE of the Python indenter; -1 without
  TerminalAutomaton* automaton = nullptr;  // grown by the walk
  const VocabTrie* trie = nullptr;
  std::chrono::steady_clock::time_point deadline;  // options.max_seconds
  // The share of the roots found so far that are walked (not monotone:
  // walking finds roots).
  std::function<void(double)> progress;
};

class VocabularyWalk {
 public:
  VocabularyWalk();
  ~VocabularyWalk();

  // The walk phase: fills the store's rows, per-root row and simulated-token
  // offsets, single-token rows of the simulated tokens and
  // stats.nfa_transition_entries.  `store` must hold the vocabulary and
  // terminal tables already.
  Status Run(const VocabularyWalkInput& input, CompiledStore* store);

  // The store phase, after Run: end of input at each root, the automaton
  // frozen, items, sets and the sequences the runtime reads.
  void Freeze(TerminalAutomaton* automaton, CompiledStore* store);

  // The roots' lexer states, in discovery order.
  const std::vector<int32_t>& roots() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_VOCAB_WALK_H_
