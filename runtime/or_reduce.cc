// CPU OR-reduction of store rows (see or_reduce.h).  Tested by
// or_reduce_test.cc.
#include "runtime/or_reduce.h"

#include <immintrin.h>

#include <cstring>

#include "grammar/base/check.h"

namespace cfgmask {
namespace {

// The portable loops work on 64-bit halves of the 32-bit words, four at a
// time, which compilers keep in registers (or vectorise) without any target
// flag.
void OrWordsPortable(uint32_t* dst, const uint32_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t d[4], s[4];
    std::memcpy(d, dst + i, sizeof d);
    std::memcpy(s, src + i, sizeof s);
    for (int k = 0; k < 4; ++k) d[k] |= s[k];
    std::memcpy(dst + i, d, sizeof d);
  }
  for (; i < n; ++i) dst[i] |= src[i];
}

// dst |= text & ~cleared, word-wise.
void OrAndNotPortable(uint32_t* dst, const uint32_t* text, const uint32_t* cleared, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t d[4], t[4], c[4];
    std::memcpy(d, dst + i, sizeof d);
    std::memcpy(t, text + i, sizeof t);
    std::memcpy(c, cleared + i, sizeof c);
    for (int k = 0; k < 4; ++k) d[k] |= t[k] & ~c[k];
    std::memcpy(dst + i, d, sizeof d);
  }
  for (; i < n; ++i) dst[i] |= text[i] & ~cleared[i];
}

// Rows are read once, from wherever they lie in a store larger than the
// caches: the loop asks for the lines 1 KiB ahead, which the hardware
// prefetcher would not fetch across a page boundary.
__attribute__((target("avx2"))) void OrWordsAvx2(uint32_t* dst, const uint32_t* src, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm_prefetch(reinterpret_cast<const char*>(src + i) + 1024, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(src + i) + 1024 + 64, _MM_HINT_T0);
    for (size_t k = 0; k < 32; k += 8) {
      __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst + i + k));
      __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + k));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + k), _mm256_or_si256(a, b));
    }
  }
  for (; i + 8 <= n; i += 8) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_or_si256(a, b));
  }
  for (; i < n; ++i) dst[i] |= src[i];
}

__attribute__((target("avx2"))) void OrAndNotAvx2(uint32_t* dst, const uint32_t* text,
                                                  const uint32_t* cleared, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst + i));
    __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(text + i));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cleared + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_or_si256(d, _mm256_andnot_si256(c, t)));
  }
  for (; i < n; ++i) dst[i] |= text[i] & ~cleared[i];
}

using OrWordsFn = void (*)(uint32_t*, const uint32_t*, size_t);
using OrAndNotFn = void (*)(uint32_t*, const uint32_t*, const uint32_t*, size_t);

// mask |= text_mask minus the sorted ids list[0..len): the ids are scattered
// into `cleared` (words words, all zero on entry and on return), then one
// word-wise pass ORs text_mask & ~cleared.  O(words + len) with no branch
// per id, where ORing the gaps between ids would call a loop per id.
void OrComplement(const uint32_t* text_mask, const int32_t* list, int32_t len, int32_t words,
                  uint32_t* mask, uint32_t* cleared, OrAndNotFn or_and_not) {
  for (int32_t i = 0; i < len; ++i) {
    CFGMASK_DCHECK(kernels::TokenWord(list[i]) < words);
    cleared[kernels::TokenWord(list[i])] |= kernels::TokenBit(list[i]);
  }
  or_and_not(mask, text_mask, cleared, static_cast<size_t>(words));
  for (int32_t i = 0; i < len; ++i) cleared[kernels::TokenWord(list[i])] = 0;
}

}  // namespace

bool CpuHasAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}

OrIsa BestOrIsa() { return CpuHasAvx2() ? OrIsa::kAvx2 : OrIsa::kPortable; }

std::vector<uint32_t> TextTokenMask(const CompiledStore& store) {
  std::vector<uint32_t> m(store.mask_words(), 0);
  for (int32_t t = 0; t < store.vocab_size; ++t) {
    if (!store.token_special[t]) m[kernels::TokenWord(t)] |= kernels::TokenBit(t);
  }
  return m;
}

kernels::StoreView HostStoreView(const CompiledStore& store, const uint32_t* text_mask) {
  kernels::StoreView v;
  v.vocab_size = store.vocab_size;
  v.mask_words = store.mask_words();
  v.num_rows = static_cast<int32_t>(store.row_kind.size());
  v.row_kind = store.row_kind.data();
  v.row_offset = store.row_offset.data();
  v.row_length = store.row_length.data();
  v.row_tokens = store.row_tokens.data();
  v.row_bits = store.row_bits.data();
  v.text_mask = text_mask;
  v.eos_ids = store.eos_ids.data();
  v.num_eos = static_cast<int32_t>(store.eos_ids.size());
  return v;
}

void OrRowsSimd(const CompiledStore& s, const uint32_t* text_mask, const int32_t* rows, size_t n,
                uint32_t* mask, OrIsa isa) {
  CFGMASK_CHECK(isa == OrIsa::kPortable || CpuHasAvx2());
  const OrWordsFn or_words = isa == OrIsa::kAvx2 ? OrWordsAvx2 : OrWordsPortable;
  const OrAndNotFn or_and_not = isa == OrIsa::kAvx2 ? OrAndNotAvx2 : OrAndNotPortable;
  const int32_t words = s.mask_words();
  // Scratch of OrComplement, per thread, zero between uses.
  thread_local std::vector<uint32_t> cleared;
  if (cleared.size() < static_cast<size_t>(words)) cleared.resize(words, 0);
  for (size_t k = 0; k < n; ++k) {
    const int32_t r = rows[k];
    const int32_t off = s.row_offset[r], len = s.row_length[r];
    switch (static_cast<RowKind>(s.row_kind[r])) {
      case RowKind::kList: {
        const int32_t* list = s.row_tokens.data() + off;
        for (int32_t i = 0; i < len; ++i) {
          mask[kernels::TokenWord(list[i])] |= kernels::TokenBit(list[i]);
        }
        break;
      }
      case RowKind::kBitset:
        CFGMASK_DCHECK(len <= words);
        or_words(mask, s.row_bits.data() + off, static_cast<size_t>(len));
        break;
      case RowKind::kComplement:
        OrComplement(text_mask, s.row_tokens.data() + off, len, words, mask, cleared.data(),
                     or_and_not);
        break;
    }
  }
}

void OrSessionRowsTwin(const kernels::StoreView& view, const int32_t* rows, int32_t n, bool eos,
                       uint32_t* out, int32_t words_per_row) {
  CFGMASK_CHECK(words_per_row >= view.mask_words);
  std::memset(out, 0, sizeof(uint32_t) * static_cast<size_t>(words_per_row));
  for (int32_t k = 0; k < n; ++k) {
    const int32_t r = rows[k];
    const int32_t iterations = kernels::RowIterations(view, r);
    for (int32_t i = 0; i < iterations; ++i) {
      uint32_t bits = 0;
      const int32_t w = kernels::OrRowIteration(view, r, i, &bits);
      out[w] |= bits;
    }
  }
  if (eos) {
    for (int32_t i = 0; i < view.num_eos; ++i) {
      out[kernels::TokenWord(view.eos_ids[i])] |= kernels::TokenBit(view.eos_ids[i]);
    }
  }
}

}  // namespace cfgmask
