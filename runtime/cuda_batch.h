// The CUDA path of the batch API (batch.h): store rows resident on the GPU,
// one kernel that ORs every session's accepted rows into the batch bitmask
// (a thread block per slice of 1,024 words of each session's mask, in shared
// memory), and one kernel that masks logits in place (fp32, fp16, bf16:
// -inf wherever the bit is 0).  The parser-side work
// (Session::AcceptedRows) stays on the CPU; only row ids cross the bus, in
// one copy from pinned memory, with what each session's filter takes from
// their OR (Session::FilterMask: the strict Python grammar's scope checks, an
// exact suffix): the tokens to clear, or, where the filter needs the mask
// itself, the row the CPU filled (BatchRows).  The masks are Session::FillMask's,
// bit for bit.
//
// Compiled only when CFGMASK_CUDA is on (library cfgmask_cuda).  The
// arithmetic is in mask_kernels.h, shared with the CPU twins
// (OrSessionRowsTwin, ApplyTokenBitmaskInplaceCpu).  Streams are passed as
// void* (a cudaStream_t; nullptr = the default stream) so this header needs no
// CUDA include.  Thread-safety: a CudaStore is read-only after Upload and may
// serve any number of batches; a CudaBatchMasker is used by one thread at a
// time.  Tested by cuda_batch_test.cc.
#ifndef CFGMASK_RUNTIME_CUDA_BATCH_H_
#define CFGMASK_RUNTIME_CUDA_BATCH_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "runtime/batch.h"
#include "runtime/mask_kernels.h"
#include "runtime/session.h"

namespace cfgmask {

// True if a CUDA device can be used; otherwise *why says why not.
bool CudaDeviceAvailable(std::string* why);

// A store's row arrays, text-token mask and EOS ids in device memory.
class CudaStore {
 public:
  static Status Upload(const CompiledStore& store, std::unique_ptr<CudaStore>* out);
  ~CudaStore();
  CudaStore(const CudaStore&) = delete;
  CudaStore& operator=(const CudaStore&) = delete;

  // Pointers into device memory.
  const kernels::StoreView& device_view() const { return view_; }

 private:
  CudaStore() = default;
  kernels::StoreView view_;
  std::vector<void*> buffers_;  // owned device allocations
};

class CudaBatchMasker {
 public:
  CudaBatchMasker() = default;
  ~CudaBatchMasker();
  CudaBatchMasker(const CudaBatchMasker&) = delete;
  CudaBatchMasker& operator=(const CudaBatchMasker&) = delete;

  // Fills row b of `device_bitmask` (B x words_per_row int32, device memory)
  // with the next-token mask of sessions[b], whose store is on the device as
  // stores[b].  Returns after the copy of the row ids and the kernel are
  // queued on `stream`; the next call waits for that copy before it reuses
  // the pinned staging buffer, and the device staging buffer is reused too,
  // so calls on different streams must not overlap.  B <= 65,535.
  Status FillNextTokenBitmask(std::span<Session* const> sessions,
                              std::span<const CudaStore* const> stores, int32_t* device_bitmask,
                              int32_t words_per_row, void* stream = nullptr);

  // The same, from rows already collected (CollectAcceptedRows).
  Status FillFromRows(const BatchRows& rows, std::span<const CudaStore* const> stores,
                      int32_t* device_bitmask, int32_t words_per_row, void* stream = nullptr);

 private:
  Status Reserve(size_t bytes);

  BatchRows rows_;
  // Staging, host (pinned) and device alike: StoreView per distinct store,
  // then int32 row_begin (B+1), store index (B), eos (B), rows.
  void* h_staging_ = nullptr;
  void* d_staging_ = nullptr;
  size_t staging_cap_ = 0;
  void* copied_ = nullptr;  // cudaEvent_t: the last staging copy is done
  std::vector<kernels::StoreView> views_;
};

// Masks B x vocab logits of `dtype` in device memory, in place: -inf
// wherever bit t of bitmask row b is 0 and for t >= 32 * words_per_row.
Status ApplyTokenBitmaskInplaceCuda(void* device_logits, LogitsDType dtype, int32_t batch,
                                    int32_t vocab, const int32_t* device_bitmask,
                                    int32_t words_per_row, void* stream = nullptr);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_CUDA_BATCH_H_
