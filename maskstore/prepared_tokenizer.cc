// A prepared tokenizer: see prepared_tokenizer.h.
#include "maskstore/prepared_tokenizer.h"

#include <chrono>

namespace cfgmask {

void CopyVocabulary(const CompiledStore& from, CompiledStore* s) {
  s->tokenizer_name = from.tokenizer_name;
  s->tokenizer_identity = from.tokenizer_identity;
  s->vocab_size = from.vocab_size;
  s->token_offsets = from.token_offsets;
  s->token_bytes = from.token_bytes;
  s->token_special = from.token_special;
  s->eos_ids = from.eos_ids;
}

void FillVocabulary(const Vocabulary& vocab, CompiledStore* s) {
  s->tokenizer_name = vocab.name;
  s->tokenizer_identity = vocab.identity;
  s->vocab_size = vocab.size();
  s->token_offsets.assign(1, 0);
  for (const std::string& t : vocab.tokens) {
    s->token_bytes.append(t.begin(), t.end());
    s->token_offsets.push_back(static_cast<int32_t>(s->token_bytes.size()));
  }
  s->token_special = vocab.special;
  s->token_special.resize(vocab.tokens.size(), 0);
  s->eos_ids = vocab.eos_ids;
}

Status PrepareTokenizer(const std::string& tokenizer_path, PreparedTokenizer* out,
                        bool with_trie) {
  const auto t0 = std::chrono::steady_clock::now();
  PreparedTokenizer p;
  CFGMASK_RETURN_IF_ERROR(LoadVocabulary(tokenizer_path, &p.vocab));
  FillVocabulary(p.vocab, &p.tokens);
  if (with_trie) p.trie = VocabTrie::Build(p.vocab);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace cfgmask
