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

Status SetEos(const std::string& eos, PreparedTokenizer* tok) {
  Vocabulary& v = tok->vocab;
  int64_t id = -1;
  const bool digits = eos.find_first_not_of("0123456789") == std::string::npos && eos.size() < 10;
  if (digits) {
    id = std::stoll(eos);
  } else {
    // By the token's bytes, or by a special token's text ("<|endoftext|>",
    // whose bytes are empty).
    for (int32_t t = 0; t < v.size() && id < 0; ++t) {
      if (v.tokens[t] == eos) id = t;
    }
    for (int32_t t = 0; t < static_cast<int32_t>(v.special_names.size()) && id < 0; ++t) {
      if (v.special_names[t] == eos) id = t;
    }
  }
  if (id < 0 || id >= v.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  "eos: no token " + (digits ? "id " + eos : "'" + eos + "'") +
                      " in the tokenizer's vocabulary of " + std::to_string(v.size()));
  }
  v.special.resize(v.tokens.size(), 0);
  v.special[id] = 1;
  v.eos_ids = {static_cast<int32_t>(id)};
  v.tokens[id].clear();  // as the readers treat the EOS they find: never text
  tok->tokens.eos_ids = v.eos_ids;
  tok->tokens.token_special.resize(v.tokens.size(), 0);
  tok->tokens.token_special[id] = 1;
  tok->trie = VocabTrie::Build(v);
  return Status::Ok();
}


}  // namespace cfgmask
