// What the compile's store phases (the tokenizer's tables, the grammar
// tables, the vocabulary walk, the freeze) take from the phases before them.
// The products whose last user is a store phase are owned here: the parse
// tables and the terminal successors (FillGrammarTables), the terminal
// automaton (grown by the walk, read by Freeze; a WalkRecord may keep it),
// the tokenizer when the compile read it itself, the trie of a vocabulary
// subset, and the grammar when no streamlining follows.  The compile driver
// (runtime/compile/compile.cc) hands them over and drops this input when the
// store phases end, so that they are released by the phase that used them
// last and the driver never goes back to the folders that made them.
// Tested by compile_test.cc and vocab_walk_test.cc.
#ifndef CFGMASK_MASKSTORE_STORE_INPUT_H_
#define CFGMASK_MASKSTORE_STORE_INPUT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "lexer/terminal_automaton.h"
#include "lexer/terminal_successors.h"
#include "lexer/vocab_trie.h"
#include "maskstore/prepared_tokenizer.h"
#include "maskstore/scanner_tables.h"
#include "parser/lalr.h"

namespace cfgmask {

struct StorePhaseInput {
  const Grammar* grammar = nullptr;
  // Set when the store phases are the grammar's last users (no streamlining).
  std::unique_ptr<const Grammar> owned_grammar;
  IndenterTerminals indenter;
  std::unique_ptr<const ParseTables> parse_tables;
  std::unique_ptr<const TerminalSuccessors> successors;
  std::shared_ptr<TerminalAutomaton> automaton;
  // The tokenizer: `tokenizer` points to it; `owned_tokenizer` holds it when
  // the compile read it itself.
  const PreparedTokenizer* tokenizer = nullptr;
  std::unique_ptr<const PreparedTokenizer> owned_tokenizer;

  // The trie the walk reads: the tokenizer's, or (tests) one of just the
  // token ids `subset` (UseSubset).
  const VocabTrie& trie() const { return subset_trie_ ? *subset_trie_ : tokenizer->trie; }
  void UseSubset(const std::vector<int32_t>& subset) {
    if (subset.empty()) return;
    subset_trie_ = std::make_unique<VocabTrie>(VocabTrie::Build(tokenizer->vocab, subset));
  }

 private:
  std::unique_ptr<VocabTrie> subset_trie_;
};

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_STORE_INPUT_H_
