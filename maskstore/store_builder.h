// Compiles a grammar and a tokenizer into a CompiledStore: the .lark reader,
// LALR(1) tables, the terminal automaton, then the vocabulary walk that
// fills nfa_transition and the mask store (streamlining seed, section 2:
// mask_store[(q, S)] = tokens whose walk from q yields terminal sequence S).
//
// The walk visits the vocabulary trie once per lexer state q found at a token
// boundary, in depth-first order; a prefix that kills every hypothesis skips
// its whole subtree.  Lexer states reached at the end of a token are new
// roots, until no new one appears.  Tested by mask_store_test.cc (against a
// brute-force walk of every token separately).
#ifndef CFGMASK_MASKSTORE_STORE_BUILDER_H_
#define CFGMASK_MASKSTORE_STORE_BUILDER_H_

#include <functional>
#include <string>

#include "grammar/status.h"
#include "maskstore/compiled_store.h"

namespace cfgmask {

struct CompileOptions {
  std::string start;              // start rule; empty = "start"
  std::string indenter = "auto";  // "python", "none", or "auto" (declared _INDENT/_DEDENT)
  int32_t max_lexer_states = 2000000;
  int32_t max_roots = 200000;
  int64_t max_store_entries = 2000000000;
  std::vector<std::string> import_paths;
  // Progress: phase name, share done in [0,1].
  std::function<void(const std::string&, double)> progress;
};

Status CompileStore(const std::string& grammar_path, const std::string& tokenizer_path,
                    const CompileOptions& options, CompiledStore* out);

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_STORE_BUILDER_H_
