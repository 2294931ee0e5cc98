// The vocabulary walk of the compile (store_builder.h) and the store it
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
// Used by store_builder.cc only.  Tested by vocab_walk_test.cc.
#ifndef CFGMASK_MASKSTORE_VOCAB_WALK_H_
#define CFGMASK_MASKSTORE_VOCAB_WALK_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/status.h"
#include "lexer/terminal_automaton.h"
#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"
#include "maskstore/store_builder.h"

namespace cfgmask {

struct VocabularyWalkInput {
  std::string grammar_path;  // named in error messages
  const CompileOptions* options = nullptr;
  const Grammar* grammar = nullptr;  // its FOLLOW prunes impossible terminal pairs
  int32_t indenter_nl = -1;          // _NEWLINE of the Python indenter; -1 without
  TerminalAutomaton* automaton = nullptr;  // grown by the walk
  const VocabTrie* trie = nullptr;
  std::chrono::steady_clock::time_point deadline;  // options->max_seconds
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
