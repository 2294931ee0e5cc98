// Helpers of the `cfgmask` command that are not argument handling: cutting a
// text into vocabulary tokens for teacher forcing (`check`, `bench`) and
// drawing a token from a mask (`sample`).  They read only the vocabulary held
// in a CompiledStore, so a store is checked without its tokenizer file.
//
// Segmentation walks a byte trie of the vocabulary (lexer/vocab_trie.h) from
// each position and collects every token whose bytes are a prefix of the rest
// of the text: greedy takes the longest, random picks one of them uniformly
// (a fixed seed makes runs repeatable).  This is not the tokenizer's own
// encoding, and need not be: a mask must allow every token sequence that
// spells a valid text, whichever one a model would have produced.
// Tested by tests/py/test_cli.py.
#ifndef CFGMASK_RUNTIME_CLI_H_
#define CFGMASK_RUNTIME_CLI_H_

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"

namespace cfgmask {

enum class SegmentMode {
  kGreedy = 0,  // longest vocabulary token at each position
  kRandom = 1,  // uniform among the tokens that match at each position
  kBytes = 2,   // no tokens: one byte at a time (Session::AdvanceBytes)
};

// One step of a segmented text: a token id, or (kBytes mode, or a byte no
// non-special token starts with) a single raw byte with token == -1.
struct Segment {
  int32_t token = -1;   // -1 = raw byte
  int32_t offset = 0;   // byte offset in the text
  int32_t length = 0;   // bytes covered
};

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

// Draws a token from `mask` (ceil(V/32) words); with `ascii_only`, among the
// allowed tokens made of printable ASCII, tab and newline when there are any.
// With probability
// `eos_bias` an allowed EOS id when one is allowed, otherwise uniformly among
// the allowed non-EOS tokens (an EOS only when nothing else is allowed).
// Returns -1 when the mask is empty.
int32_t DrawToken(const CompiledStore& store, const std::vector<uint32_t>& mask, double eos_bias,
                  std::mt19937_64* rng, bool ascii_only = false);

// "FILE:LINE:COL" for a byte offset into `text` (1-based line and column,
// columns counted in bytes).
std::string TextPosition(std::string_view file, std::string_view text, size_t offset);

// A token's bytes, printable: C-style escapes for control and non-ASCII bytes.
std::string Printable(std::string_view bytes, size_t max_len = 40);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_CLI_H_
