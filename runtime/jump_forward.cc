// Jump-forward text and its tokens: see jump_forward.h.  Tested by
// serving_test.cc.
#include "runtime/jump_forward.h"

#include <algorithm>
#include <span>

#include "lexer/tokenizer/tokenizer.h"
#include "runtime/segment.h"

namespace cfgmask {

JumpForwarder::JumpForwarder(const CompiledStore& store)
    : trie_(StoreVocabTrie(store)) {}

void JumpForwarder::Matches(std::string_view rest,
                            std::vector<std::pair<int32_t, int32_t>>* out) const {
  out->clear();
  int32_t n = 0;
  for (size_t k = 0; k < rest.size(); ++k) {
    n = trie_.Child(n, static_cast<uint8_t>(rest[k]));
    if (n < 0) break;
    const std::span<const int32_t> ids = trie_.tokens_at(n);
    if (!ids.empty()) out->emplace_back(ids.back(), static_cast<int32_t>(k + 1));
  }
  std::reverse(out->begin(), out->end());
}

int32_t JumpForwarder::Tokenize(const Session& session, std::string_view text,
                                std::vector<int32_t>* tokens) const {
  tokens->clear();
  Session fork = session.Fork();
  std::vector<std::pair<int32_t, int32_t>> m;
  size_t pos = 0;
  while (pos < text.size()) {
    Matches(text.substr(pos), &m);
    int32_t taken = 0;
    for (const auto& [token, length] : m) {
      if (fork.Advance(token).ok()) {
        tokens->push_back(token);
        taken = length;
        break;
      }
    }
    if (taken == 0) break;
    pos += static_cast<size_t>(taken);
  }
  return static_cast<int32_t>(pos);
}

JumpForwardResult JumpForwarder::Compute(const Session& session, int32_t max_bytes) const {
  JumpForwardResult r;
  r.text = session.JumpForwardString(max_bytes);
  if (!r.text.empty()) r.covered = Tokenize(session, r.text, &r.tokens);
  return r;
}

}  // namespace cfgmask
