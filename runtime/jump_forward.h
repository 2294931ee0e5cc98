// Jump-forward decoding: when the grammar leaves only one way to continue,
// a server appends the forced text without sampling it, one model step for
// many tokens.  The forced text is Session::JumpForwardString (the longest
// string every byte of which is the only byte the session accepts, stopping
// where the text could end); this file turns it into tokens.
//
// Tokenisation is greedy longest match through the vocabulary trie
// (lexer/vocab_trie.h): at each position the longest token spelling a prefix
// of the rest of the forced text, verified by advancing a fork of the
// session; a token the fork rejects (none should, as its bytes are forced)
// gives way to the next shorter match.  When several ids spell the same
// bytes the highest id is taken: SentencePiece vocabularies put their
// byte-fallback pieces (<0x20>...) first, and the model expects the
// vocabulary's own piece.  Greedy longest match is not the tokenizer's own
// encoding; every token of it is accepted by the session, which is the
// contract.  If some byte starts no token, the tokens stop there and
// `covered` says how much of the text they spell.
//
// Thread-safety: a JumpForwarder is read-only after construction and may be
// shared by any number of threads; the session passed in is only read.
// Tested by serving_test.cc.
#ifndef CFGMASK_RUNTIME_JUMP_FORWARD_H_
#define CFGMASK_RUNTIME_JUMP_FORWARD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"
#include "runtime/session.h"

namespace cfgmask {

struct JumpForwardResult {
  std::string text;             // the forced text (possibly empty)
  std::vector<int32_t> tokens;  // tokens spelling text[0, covered), each accepted in turn
  int32_t covered = 0;          // bytes of `text` the tokens spell
};

class JumpForwarder {
 public:
  // Builds the vocabulary trie of `store` (O(vocabulary bytes)).
  explicit JumpForwarder(const CompiledStore& store);

  // The forced text of `session` (at most max_bytes) and its tokens.  The
  // session is unchanged; O(forced bytes * 256) lexer steps for the text plus
  // one Advance per token on a fork.
  JumpForwardResult Compute(const Session& session, int32_t max_bytes = 256) const;

  // Greedy longest-match tokens of `text`, each accepted by a fork of
  // `session` in turn; returns how many bytes they spell.
  int32_t Tokenize(const Session& session, std::string_view text,
                   std::vector<int32_t>* tokens) const;

 private:
  // Every (token, length) whose bytes are a prefix of `rest`, longest first;
  // of ids spelling the same bytes, only the highest.
  void Matches(std::string_view rest, std::vector<std::pair<int32_t, int32_t>>* out) const;

  VocabTrie trie_;
};

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_JUMP_FORWARD_H_
