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
#include <span>
#include <vector>

#include "maskstore/compiled_store.h"
#include "maskstore/id_index.h"

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

// Rows by reference: a store's rows are references (sequence id, kind,
// offset, length) into its two payload arrays, and equal payloads are
// stored once.  RowPayloads appends rows to a store whose payloads it
// interns: a row whose ids (row_tokens: a kList or kComplement row) or
// words (row_bits: a kBitset row) equal an earlier row's points at that
// row's payload instead of appending a copy.  The runtime reads a row by its
// offset and length as before (shared payloads are read-only).  Serial: the
// order of the appends decides the offsets, so a caller appends in root
// order to keep the store the same for any thread count.
class RowPayloads {
 public:
  // Indexes the payloads of s's rows so far (a store that is being built
  // appends to them).
  explicit RowPayloads(CompiledStore* s);
  // Appends row `seq` -> tokens (sorted, unique), encoded as AppendRow does.
  void Append(int32_t seq, const std::vector<int32_t>& tokens, int32_t text_tokens);
  // Appends row `seq` of kind `kind` with payload `ids` (kList, kComplement)
  // or `bits` (kBitset).
  void AppendList(int32_t seq, RowKind kind, std::span<const int32_t> ids);
  void AppendBits(int32_t seq, std::span<const uint32_t> bits);
  // Appends row r of `old` under sequence `seq`, in its own encoding.
  void Copy(const CompiledStore& old, int32_t r, int32_t seq);
  // Distinct payloads so far.
  int64_t distinct() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    uint64_t hash;
    int32_t offset, length;
    bool bits;
  };
  // The offset of an equal payload in s's arrays, the payload appended when
  // there is none.
  int32_t Intern(bool bits, const void* data, int32_t length);
  CompiledStore* s_;
  std::vector<Entry> entries_;
  IdIndex index_;
  std::vector<int32_t> scratch_;
  std::vector<uint32_t> scratch_bits_;
};

// Distinct row payloads of a store (kind aside: a list and a complement
// with the same ids count once, as they are stored once).
int64_t DistinctRowPayloads(const CompiledStore& s);

// Appends the token ids of row `r` to `out`, ascending.
void DecodeRow(const CompiledStore& s, int32_t r, std::vector<int32_t>* out);

// Drops the item sequences that nothing reads (rows, end-of-input
// alternatives, byte steps' hits), renumbering the rest densely in their
// order; sequence 0 stays the empty one.
void CompactSequences(CompiledStore* s);

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_ROW_CODEC_H_
