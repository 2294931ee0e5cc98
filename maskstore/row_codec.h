// Adaptive row storage of the mask store (XGrammar's choice, made per row):
// a sorted token-id list, the complement of one (every non-special token
// except those listed), or a ceil(V/32)-word bitset, whichever is the
// cheapest to OR.  Lists and complements longer than a quarter of the bitset's
// words are stored as bitsets: scattering that many ids costs more than a
// word-wise (SIMD) OR.  Used by the store builder and the streamlining pass;
// tested by streamline_store_test.cc through the masks it reproduces.
#ifndef CFGMASK_MASKSTORE_ROW_CODEC_H_
#define CFGMASK_MASKSTORE_ROW_CODEC_H_

#include <cstdint>
#include <vector>

#include "maskstore/compiled_store.h"

namespace cfgmask {

// Number of non-special tokens (the universe of complement rows).
int32_t TextTokenCount(const CompiledStore& s);

// Bytes of the row arrays: ids, bitset words and 16 bytes of header a row.
int64_t RowPayloadBytes(const CompiledStore& s);

// The rows the store would have if a row were keyed, as in the design, by
// its lexer state and the terminals of S alone: an Emit gives its terminal, a
// Tail its set of candidate terminals; Hit items, newline columns and blocker
// sets are dropped, so rows that differ only in the contextual lexing
// conditions the runtime checks count once.  A statistic (cfgmask stats),
// not used by the runtime.
int64_t TerminalSequenceKeys(const CompiledStore& s);
// The design's key of item sequence `seq`, into `key` (cleared first): per
// Emit its terminal, per Tail -2 - its candidate set id, Hits left out.
void TerminalSequenceKey(const CompiledStore& s, int32_t seq, std::vector<int32_t>* key);

// Appends row `seq` -> `tokens` (sorted, unique) to the store's row arrays.
void AppendRow(int32_t seq, const std::vector<int32_t>& tokens, int32_t text_tokens,
               CompiledStore* s);

// Appends the token ids of row `r` to `out`, ascending.
void DecodeRow(const CompiledStore& s, int32_t r, std::vector<int32_t>* out);

// Drops the item sequences that nothing reads (rows, end-of-input
// alternatives, byte steps' hits), renumbering the rest densely in their
// order; sequence 0 stays the empty one.
void CompactSequences(CompiledStore* s);

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_ROW_CODEC_H_
