// Fuzz target: the HF tokenizer.json reader (JSON parser, BPE vocab, added tokens, byte-level and SentencePiece decoders), then LoadVocabulary's format detection on the
// same bytes.  A file either loads to a consistent vocabulary or gives a
// kTokenizer/kIo error.  Seeds: make_seeds.py (small files cut from the real
// tokenizers).
#include <cstdint>
#include <string>

#include "lexer/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  if (size > (1 << 20)) return 0;
  const std::string& path = FuzzScratchPath(".json");
  FuzzWriteFile(path, data, size);
  Vocabulary v;
  Status st = LoadTokenizerJson(path, &v);
  if (st.ok()) {
    CFGMASK_FUZZ_CHECK(v.special.size() == v.tokens.size());
    for (int32_t e : v.eos_ids) CFGMASK_FUZZ_CHECK(e >= 0 && e < v.size());
  } else {
    CFGMASK_FUZZ_CHECK(!st.message().empty());
  }
  Vocabulary w;
  st = LoadVocabulary(path, &w);
  if (st.ok()) {
    CFGMASK_FUZZ_CHECK(w.special.size() == w.tokens.size());
    CFGMASK_FUZZ_CHECK(w.identity == VocabularyIdentity(w));
  }
  return 0;
}
