// A tokenizer read once and made ready for any number of compiles (the
// peers' "tokenizer info"): its vocabulary, its byte trie and the store's
// token tables (token bytes, special flags, EOS ids, identity).  The compile
// driver (runtime/compile/compile.h) asks for it after the grammar's tables are
// built, so that a bad grammar is reported before the tokenizer file is read.
// Tested by vocab_walk_test.cc (compiles from tokenizer files) and
// tests/py/test_package.py (cfgmask.Tokenizer prepared once for several compiles).
#ifndef CFGMASK_MASKSTORE_PREPARED_TOKENIZER_H_
#define CFGMASK_MASKSTORE_PREPARED_TOKENIZER_H_

#include <string>

#include "grammar/base/status.h"
#include "lexer/tokenizer/tokenizer.h"
#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"

namespace cfgmask {

// Read-only once prepared: compiles on several threads may share one.
struct PreparedTokenizer {
  Vocabulary vocab;
  VocabTrie trie;
  CompiledStore tokens;  // only the vocabulary fields (FillVocabulary)
  double seconds = 0;    // reading and preparing
};

// Reads a tokenizer file (HF tokenizer.json, GGUF, tiktoken) and prepares it;
// without the trie when `with_trie` is false (a compile of a vocabulary
// subset builds its own).
Status PrepareTokenizer(const std::string& tokenizer_path, PreparedTokenizer* out,
                        bool with_trie = true);

// The store's vocabulary fields, from a vocabulary or from a prepared
// tokenizer's store.
void FillVocabulary(const Vocabulary& vocab, CompiledStore* s);
void CopyVocabulary(const CompiledStore& from, CompiledStore* s);

// Makes the token `eos` names (a token id in decimal, or the token's exact
// text, or a special token's name) the tokenizer's only EOS, never text; the
// trie is rebuilt.  An unknown token is kInvalidArgument.
Status SetEos(const std::string& eos, PreparedTokenizer* tok);

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_PREPARED_TOKENIZER_H_
