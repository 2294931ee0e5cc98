// Cutting a text into vocabulary tokens for teacher forcing (`cfgmask check`,
// `cfgmask bench`, the completion of `cfgmask sample`).  It reads only the
// vocabulary held in a CompiledStore, so a store is checked without its
// tokenizer file.
//
// Segmentation walks a byte trie of the vocabulary (lexer/vocab_trie.h) from
// each position and collects every token whose bytes are a prefix of the rest
// of the text: greedy takes the longest, random picks one of them uniformly
// (a fixed seed makes runs repeatable).  This is not the tokenizer's own
// encoding, and need not be: a mask must allow every token sequence that
// spells a valid text, whichever one a model would have produced.
//
// `check --segment canonical` instead reads the tokenizer's own encoding of
// each file from a companion file of token ids (ReadTokenIds), written by
// tests/tools/canonical_ids.py with the HF `tokenizers` package: the ids'
// bytes must spell the file exactly.
// Tested by tests/py/test_cli.py, tests/py/test_cli_corpus.py and
// row_memo_test.cc.
#ifndef CFGMASK_RUNTIME_SEGMENT_H_
#define CFGMASK_RUNTIME_SEGMENT_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/base/status.h"
#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"

namespace cfgmask {

enum class SegmentMode {
  kGreedy = 0,  // longest vocabulary token at each position
  kRandom = 1,  // uniform among the tokens that match at each position
  kBytes = 2,   // no tokens: one byte at a time (Session::AdvanceBytes)
  kCanonical = 3,  // the tokenizer's own encoding, read from FILE.ids (ReadTokenIds)
};

// One step of a segmented text: a token id, or (kBytes mode, or a byte no
// non-special token starts with) a single raw byte with token == -1.
struct Segment {
  int32_t token = -1;   // -1 = raw byte
  int32_t offset = 0;   // byte offset in the text
  int32_t length = 0;   // bytes covered
};

// The byte trie of a store's vocabulary (special tokens marked as such).
VocabTrie StoreVocabTrie(const CompiledStore& store);

class Segmenter {
 public:
  explicit Segmenter(const CompiledStore& store);

  // Cuts `text` into steps; `rng` is used by kRandom only.
  std::vector<Segment> Cut(std::string_view text, SegmentMode mode, std::mt19937_64* rng) const;

 private:
  // Appends every (token, length) whose bytes are a prefix of `rest`.
  void Matches(std::string_view rest, std::vector<std::pair<int32_t, int32_t>>* out) const;

  VocabTrie trie_;
};

// Reads whitespace-separated decimal token ids (`ids_text`, from file
// `ids_path`) as the segmentation of `text` (from `text_path`): every id must
// be a non-special token of the store's vocabulary and their bytes, in order,
// must spell `text` exactly.  Errors (kInvalidArgument) are one line with the
// position: "IDS:LINE:COL: ..." for a malformed or unknown id,
// "TEXT:LINE:COL: ..." where the ids' bytes and the text part.
Status ReadTokenIds(const CompiledStore& store, std::string_view ids_path,
                    std::string_view ids_text, std::string_view text_path,
                    std::string_view text, std::vector<Segment>* out);

// "FILE:LINE:COL" for a byte offset into `text` (1-based line and column,
// columns counted in bytes).
std::string TextPosition(std::string_view file, std::string_view text, size_t offset);

// A token's bytes, printable: C-style escapes for control and non-ASCII bytes.
std::string Printable(std::string_view bytes, size_t max_len = 40);

// `token 42 "if"`: a token of the store's vocabulary for messages.
std::string TokenLabel(const CompiledStore& store, int32_t token);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_SEGMENT_H_
