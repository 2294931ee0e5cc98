// The batch API of the serving runtime: one call fills the next-token
// bitmasks of B decoding sessions, one call advances them all, one call
// masks a batch of logits in place.  The bitmask layout is the one XGrammar
// and llguidance hand to inference engines: B rows of `words_per_row` int32
// words, row-major, bit (t & 31) of word (t >> 5) set iff token t is allowed.
//
// Per step, each session computes its accepted store rows
// (Session::AcceptedRows: the parser-side hot path) and ORs them into its row
// (or_reduce.h: scatter for sparse rows, AVX2 for dense ones); sessions run
// in parallel with tbb::parallel_for.  The CUDA path (cuda_batch.h) shares
// CollectAcceptedRows and moves only the OR to the GPU.
//
// Thread-safety: a CompiledStore is read-only and may be shared by any number
// of sessions on any threads, with different stores mixed in one batch.  A
// Session must be used by one thread at a time, so a session may appear at
// most once in a batch.  A BatchMatcher is used by one thread at a time (it
// runs its own parallel work); the stores it has seen must outlive it.
// Tested by batch_test.cc.
#ifndef CFGMASK_RUNTIME_BATCH_H_
#define CFGMASK_RUNTIME_BATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "runtime/mask_kernels.h"
#include "runtime/session.h"

namespace cfgmask {

// The accepted rows of a batch step, flattened: session b's rows are
// rows[row_begin[b] .. row_begin[b+1]), eos[b] says whether EOS is allowed.
// What the session's filter (Session::FilterMask: the scope layer's checks,
// an exact suffix) takes from their OR comes with them: session b's mask is
// the OR less the tokens clears[clear_begin[b] .. clear_begin[b+1]); or,
// when whole[b] >= 0, exactly the store's mask_words() words at
// whole_words[whole[b]] that the CPU filled (a filter that needs the mask
// itself), its rows then empty and eos[b] 0.
struct BatchRows {
  std::vector<int32_t> rows;
  std::vector<int32_t> row_begin;    // B + 1
  std::vector<uint8_t> eos;          // B
  std::vector<int32_t> clears;
  std::vector<int32_t> clear_begin;  // B + 1
  std::vector<int32_t> whole;        // B: -1, or an offset into whole_words
  std::vector<uint32_t> whole_words;
};

// Collects every session's accepted rows and its filter's part, sessions in
// parallel.
void CollectAcceptedRows(std::span<Session* const> sessions, BatchRows* out);

// The CPU reference of a BatchRows row's last step: `row` (words_per_row
// words) holds the OR of session b's rows and EOS (OrSessionRowsTwin); this
// applies the clears, or writes the whole row, as the CUDA kernel does.
void FinishBatchRow(const BatchRows& rows, int32_t b, int32_t mask_words, uint32_t* row,
                    int32_t words_per_row);

// Accepts the ids token(0), ..., token(k - 1) in order, stopping early when
// the session ends.  Returns -1, or the index of the first refused id (an id
// out of int32 range is refused) with the session left as before the call.
// `taken` receives how many ids were accepted (0 on a refusal).
int64_t AcceptTokens(Session* session, int64_t k, const std::function<int64_t(int64_t i)>& token,
                     int64_t* taken);

class BatchMatcher {
 public:
  BatchMatcher() = default;
  BatchMatcher(const BatchMatcher&) = delete;
  BatchMatcher& operator=(const BatchMatcher&) = delete;

  // Fills row b of `bitmask` (B x words_per_row int32) with the next-token
  // mask of sessions[b], which reads stores[b] (the store it was built on).
  // words_per_row must cover every store's mask_words(); words past a
  // store's vocabulary are zero.  Equal, bit for bit, to Session::FillMask.
  Status FillNextTokenBitmask(std::span<Session* const> sessions,
                              std::span<const CompiledStore* const> stores, int32_t* bitmask,
                              int32_t words_per_row);

  // Advances sessions[b] by tokens[b], sessions in parallel.  All or
  // nothing: when one session fails, every session of the batch is left as
  // before the call (those that moved are rolled back) and the first failure
  // (lowest b) is returned, its message prefixed with "session b: ".
  Status AdvanceBatch(std::span<Session* const> sessions, std::span<const int32_t> tokens);

  // One logits-processor step over a batch, in one engine call: row b of the
  // B x k ids that `token(b, i)` reads (the ids the sampler added since the
  // last step) is accepted by sessions[b] unless it has ended (it then takes
  // the framework's padding); then row b of `bitmask` (B x words_per_row) is
  // filled with sessions[b]'s next-token mask, all ones for an ended
  // session, or exactly the ids of only[b] when `only` is given and only[b]
  // is not empty (steering to an end).  Returns -1, or b * k + i for the
  // first refused id (lowest b, then i; an id out of int32 range is
  // refused), with every session of the batch left as before the call and
  // nothing filled.  step_ns[0], step_ns[1] receive the accepting and the
  // filling time.
  int64_t AcceptAndFill(std::span<Session* const> sessions,
                        std::span<const CompiledStore* const> stores, int64_t k,
                        const std::function<int64_t(int64_t b, int64_t i)>& token,
                        std::span<const std::vector<int32_t>> only, uint32_t* bitmask,
                        int64_t words_per_row, int64_t step_ns[2]);

  // The text-token mask of `store` (TextTokenMask), computed once.
  const std::vector<uint32_t>& TextMask(const CompiledStore* store);

 private:
  std::mutex mu_;  // guards text_masks_
  std::unordered_map<const CompiledStore*, std::unique_ptr<std::vector<uint32_t>>> text_masks_;
};

// Sets logits[b * vocab + t] to -inf wherever bit t of bitmask row b is 0,
// and for every t >= 32 * words_per_row (padding past the tokenizer's
// vocabulary).  `logits` is B x vocab of `dtype`; rows in parallel.  This is
// the CPU twin of ApplyTokenBitmaskKernel (mask_kernels.cu).
Status ApplyTokenBitmaskInplaceCpu(void* logits, LogitsDType dtype, int32_t batch, int32_t vocab,
                                   const int32_t* bitmask, int32_t words_per_row);

// One row of `vocab` logits whose elements lie `stride` elements apart
// (llama-cpp-python hands its logits as a field of an array of records):
// the same decision per token as ApplyTokenBitmaskInplaceCpu, which it is
// for stride 1.
Status ApplyTokenBitmaskStridedCpu(void* logits, LogitsDType dtype, int32_t vocab, int64_t stride,
                                   const int32_t* bitmask, int32_t words_per_row);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_BATCH_H_
