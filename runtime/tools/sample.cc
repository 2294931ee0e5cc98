// Token drawing and the random walks of `cfgmask sample`: see sample.h.
#include "runtime/tools/sample.h"

#include <algorithm>
#include <string>

namespace cfgmask {

int32_t DrawToken(const CompiledStore& store, const std::vector<uint32_t>& mask, double eos_bias,
                  std::mt19937_64* rng, bool ascii_only) {
  auto allowed = [&](int32_t t) { return (mask[t >> 5] >> (t & 31)) & 1u; };
  std::vector<int32_t> eos;
  for (int32_t e : store.eos_ids) {
    if (e >= 0 && e < store.vocab_size && allowed(e)) eos.push_back(e);
  }
  std::vector<int32_t> text;
  for (int32_t t = 0; t < store.vocab_size; ++t) {
    if (allowed(t) && std::find(store.eos_ids.begin(), store.eos_ids.end(), t) ==
                          store.eos_ids.end()) {
      text.push_back(t);
    }
  }
  if (ascii_only) {
    std::vector<int32_t> ascii;
    for (int32_t t : text) {
      bool ok = true;
      for (unsigned char c : store.TokenBytes(t)) ok &= (c >= 0x20 && c < 0x7F) || c == '\n' || c == '\t';
      if (ok) ascii.push_back(t);
    }
    if (!ascii.empty()) text.swap(ascii);
  }
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  if (!eos.empty() && (text.empty() || coin(*rng) < eos_bias)) {
    return eos[std::uniform_int_distribution<size_t>(0, eos.size() - 1)(*rng)];
  }
  if (text.empty()) return -1;
  return text[std::uniform_int_distribution<size_t>(0, text.size() - 1)(*rng)];
}

SampleResult SampleText(const CompiledStore& store, const Segmenter& segmenter,
                        Completer* completer, Session* session, std::mt19937_64* rng,
                        const SampleOptions& options) {
  SampleResult r;
  session->Reset();
  std::string& ending = r.ending;
  int64_t& tokens = r.tokens;
  bool& complete = r.complete;
  for (; tokens < options.max_tokens; ++tokens) {
    const int32_t tok = DrawToken(store, session->Mask(), options.eos_bias, rng, options.ascii_only);
    if (tok < 0) {
      ending = "stopped: the mask is empty and EOS is not allowed (a prefix)";
      break;
    }
    if (std::find(store.eos_ids.begin(), store.eos_ids.end(), tok) != store.eos_ids.end()) {
      ending = "ended with EOS";
      complete = true;
      break;
    }
    const Status st = session->Advance(tok);
    if (!st.ok()) {
      ending = "stopped: " + TokenLabel(store, tok) + " is in the mask but Advance refuses it: " +
               OneLine(st.message()) + " (a prefix)";
      break;
    }
  }
  if (ending.empty()) {
    std::string why;
    const int64_t walked = tokens;
    if (CompleteWithTokens(store, segmenter, completer, session, &tokens, &why)) {
      ending = "reached --max-tokens " + std::to_string(options.max_tokens) + ", " + why +
               ", ended with EOS";
      complete = true;
    } else {
      ending = "reached --max-tokens " + std::to_string(options.max_tokens) + " after " +
               std::to_string(walked) + " tokens; " + why + " (a prefix)";
    }
  }
  return r;
}

}  // namespace cfgmask
