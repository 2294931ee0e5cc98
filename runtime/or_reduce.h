// CPU OR-reduction of accepted store rows into a token bitmask: the
// "mask |= mask_store[(q, S)]" of the streamlining seed's generate(), made
// fast.  Sparse rows (sorted id lists) are scattered bit by bit; dense rows
// are ORed word-wise: bitsets directly, complements as the text-token mask
// AND NOT a scratch row into which their few ids are scattered (and cleared
// again after).  The word-wise loops use AVX2 when the CPU has it (chosen at
// run time with __builtin_cpu_supports; they are compiled with
// __attribute__((target("avx2"))) so the library still runs anywhere) and
// 64-bit words otherwise.
//
// OrRows (runtime/session.h) is the plain reference: every function here
// gives the same mask.  OrSessionRowsTwin is the CPU twin of the CUDA kernel
// in mask_kernels.cu (one session's rows, word-parallel formulation from
// mask_kernels.h).  Tested by or_reduce_test.cc.
#ifndef CFGMASK_RUNTIME_OR_REDUCE_H_
#define CFGMASK_RUNTIME_OR_REDUCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/mask_kernels.h"

namespace cfgmask {

// Which word-wise OR loop to use.
enum class OrIsa : int32_t {
  kPortable = 0,  // plain C++ (whatever the compiler makes of it)
  kAvx2 = 1,      // 256-bit loads/ORs; only where CpuHasAvx2()
};

bool CpuHasAvx2();
// The best OrIsa for this CPU.
OrIsa BestOrIsa();

// The base of every kComplement row: bit t set iff token t is not special
// (mask_words() words).  Computed once per store.
std::vector<uint32_t> TextTokenMask(const CompiledStore& store);

// A StoreView over host memory: `store` and `text_mask` must outlive it.
kernels::StoreView HostStoreView(const CompiledStore& store, const uint32_t* text_mask);

// ORs rows[0..n) of `store` into `mask` (mask_words() words, not cleared):
// the same result as OrRows.  `text_mask` is TextTokenMask(store).
// Uses a per-thread scratch row of mask_words() words.
void OrRowsSimd(const CompiledStore& store, const uint32_t* text_mask, const int32_t* rows,
                size_t n, uint32_t* mask, OrIsa isa);
inline void OrRowsSimd(const CompiledStore& store, const uint32_t* text_mask,
                       const int32_t* rows, size_t n, uint32_t* mask) {
  OrRowsSimd(store, text_mask, rows, n, mask, BestOrIsa());
}

// CPU twin of OrSessionRowsKernel: writes the whole bitmask row `out`
// (words_per_row >= view.mask_words; padding words zeroed) as the OR of
// rows[0..n) plus, if `eos`, the EOS ids, iterating exactly as a block does.
void OrSessionRowsTwin(const kernels::StoreView& view, const int32_t* rows, int32_t n, bool eos,
                       uint32_t* out, int32_t words_per_row);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_OR_REDUCE_H_
