// The arithmetic shared by the CUDA kernels (mask_kernels.cu) and their CPU
// twins (or_reduce.cc, batch.cc): how a store row contributes to a word of a
// token bitmask, and how a bit of the bitmask decides one logit.
//
// A step's mask is the OR of the accepted store rows plus the EOS ids
// (streamlining seed, generate(): "mask |= mask_store[(q, S)]").  Rows are
// stored adaptively (maskstore/compiled_store.h): a sorted id list is
// scattered one token at a time, a bitset is ORed word by word, and a
// complement row is, word by word, the text-token mask minus the listed ids
// that fall into that word (found by binary search in the sorted list, so
// that every word is computed independently, as a GPU thread does).
//
// Everything here is header-only and `__host__ __device__` under nvcc, so
// the kernels and their twins cannot drift apart.  Tested by
// or_reduce_test.cc (twins against OrRows), batch_test.cc and
// cuda_batch_test.cc (kernels against twins).
#ifndef CFGMASK_RUNTIME_MASK_KERNELS_H_
#define CFGMASK_RUNTIME_MASK_KERNELS_H_

#include <cstdint>

#if defined(__CUDACC__)
#define CFGMASK_HD __host__ __device__
#else
#define CFGMASK_HD
#endif

namespace cfgmask {

// Element type of a logits buffer.  16-bit types are handled as raw bits, so
// the host needs no half-precision arithmetic.
enum class LogitsDType : int32_t {
  kFloat32 = 0,   // IEEE binary32
  kFloat16 = 1,   // IEEE binary16
  kBFloat16 = 2,  // bfloat16 (top half of a binary32)
};

namespace kernels {

// -inf in each dtype, as bits.
constexpr uint32_t kNegInfFloat32Bits = 0xFF800000u;
constexpr uint16_t kNegInfFloat16Bits = 0xFC00u;
constexpr uint16_t kNegInfBFloat16Bits = 0xFF80u;

// Row kinds, as stored in CompiledStore::row_kind (RowKind).
constexpr int32_t kRowList = 0;
constexpr int32_t kRowComplement = 1;
constexpr int32_t kRowBitset = 2;

// The store arrays a reduction reads, as raw pointers (host or device
// memory) so that one struct serves the kernels and their twins.
struct StoreView {
  int32_t vocab_size = 0;
  int32_t mask_words = 0;               // ceil(vocab_size / 32)
  int32_t num_rows = 0;
  const int32_t* row_kind = nullptr;
  const int32_t* row_offset = nullptr;
  const int32_t* row_length = nullptr;
  const int32_t* row_tokens = nullptr;  // kList / kComplement payload
  const uint32_t* row_bits = nullptr;   // kBitset payload
  const uint32_t* text_mask = nullptr;  // mask_words: every non-special token
  const int32_t* eos_ids = nullptr;
  int32_t num_eos = 0;
};

CFGMASK_HD inline int32_t TokenWord(int32_t token) { return token >> 5; }
CFGMASK_HD inline uint32_t TokenBit(int32_t token) { return 1u << (token & 31); }

// How many iterations the OR of row r takes: one per listed token for a
// list, one per word for a bitset or a complement.
CFGMASK_HD inline int32_t RowIterations(const StoreView& s, int32_t r) {
  return s.row_kind[r] == kRowComplement ? s.mask_words : s.row_length[r];
}

// The i-th token of list row r: returns its word and sets *bit.
CFGMASK_HD inline int32_t OrListRowAt(const StoreView& s, int32_t r, int32_t i, uint32_t* bit) {
  const int32_t t = s.row_tokens[s.row_offset[r] + i];
  *bit = TokenBit(t);
  return TokenWord(t);
}

// Word w of bitset row r (a bitset row may be shorter than the mask).
CFGMASK_HD inline uint32_t OrBitsetWord(const StoreView& s, int32_t r, int32_t w) {
  return w < s.row_length[r] ? s.row_bits[s.row_offset[r] + w] : 0u;
}

// First index i in the sorted a[0..n) with a[i] >= key.
CFGMASK_HD inline int32_t LowerBound(const int32_t* a, int32_t n, int32_t key) {
  int32_t lo = 0, hi = n;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (a[mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Word w of complement row r: the text tokens of w except the listed ones.
CFGMASK_HD inline uint32_t OrComplementWord(const StoreView& s, int32_t r, int32_t w) {
  const int32_t* list = s.row_tokens + s.row_offset[r];
  const int32_t n = s.row_length[r];
  const int32_t end = (w + 1) << 5;
  uint32_t cleared = 0;
  for (int32_t i = LowerBound(list, n, w << 5); i < n && list[i] < end; ++i) {
    cleared |= TokenBit(list[i]);
  }
  return s.text_mask[w] & ~cleared;
}

// Iteration i of row r (RowIterations): the word it touches and its bits.
CFGMASK_HD inline int32_t OrRowIteration(const StoreView& s, int32_t r, int32_t i, uint32_t* bits) {
  switch (s.row_kind[r]) {
    case kRowList:
      return OrListRowAt(s, r, i, bits);
    case kRowBitset:
      *bits = OrBitsetWord(s, r, i);
      return i;
    default:
      *bits = OrComplementWord(s, r, i);
      return i;
  }
}

// Is token t allowed by a bitmask row of `words_per_row` int32 words?
// Tokens past the row (model vocabularies padded beyond the tokenizer's)
// are never allowed.
CFGMASK_HD inline bool MaskAllows(const int32_t* mask_row, int32_t words_per_row, int32_t t) {
  if (t >= words_per_row * 32) return false;
  return (static_cast<uint32_t>(mask_row[TokenWord(t)]) & TokenBit(t)) != 0;
}

// The logit (as bits of its dtype) after masking: kept, or -inf.
template <typename Bits>
CFGMASK_HD inline Bits ApplyMaskToLogit(Bits logit, bool allowed, Bits neg_inf) {
  return allowed ? logit : neg_inf;
}

}  // namespace kernels
}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_MASK_KERNELS_H_
