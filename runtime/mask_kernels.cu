// CUDA kernels of the batch API (cuda_batch.h) and their host wrappers.
//
// OrSessionRowsKernel: a grid of (slice, session) thread blocks.  A slice is
// kSliceWords words of one session's mask (32,768 tokens), kept in shared
// memory; the block zeroes it, walks the session's accepted rows in order
// and ORs in each row's part of the slice, its threads sharing the row's
// iterations (mask_kernels.h: a bitset word, a complement word, or a listed
// token; a long sorted list's part inside the slice is found by binary
// search), with shared-memory atomicOr and no barrier between rows; EOS ids
// last; then the tokens the session's filter clears (BatchRows::clears) are
// cleared and the slice is written out.  A row the CPU filled whole
// (BatchRows::whole: a filter that needs the mask) is copied instead.
// Slicing puts B x ceil(words / kSliceWords) blocks to work (a block per
// session left most of the GPU idle: at B = 16 and 262,144 tokens the
// first version took 0.8 ms, measured on an H200, docs/gpu.md) and bounds
// the shared memory at 4 KiB whatever the vocabulary.
// ApplyTokenBitmaskKernel: one thread per logit, raw bits of the dtype.
// The CPU twins are OrSessionRowsTwin (or_reduce.h) followed by
// FinishBatchRow (batch.h), and ApplyTokenBitmaskInplaceCpu (batch.h).  Tested by cuda_batch_test.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "runtime/cuda_batch.h"
#include "runtime/or_reduce.h"

namespace cfgmask {
namespace {

constexpr int kOrThreads = 256;
constexpr int32_t kSliceWords = 1024;
constexpr int kApplyThreads = 256;

Status CudaError(cudaError_t err, const char* what) {
  return Status(ErrorCode::kResourceLimit,
                std::string("cuda: ") + what + ": " + cudaGetErrorString(err));
}

#define CFGMASK_CUDA_RETURN_IF_ERROR(expr, what)         \
  do {                                                   \
    cudaError_t _err = (expr);                           \
    if (_err != cudaSuccess) return CudaError(_err, what); \
  } while (0)

__global__ void OrSessionRowsKernel(const kernels::StoreView* views, const int32_t* store_index,
                                    const int32_t* row_begin, const int32_t* eos,
                                    const int32_t* rows, const int32_t* clear_begin,
                                    const int32_t* clears, const int32_t* whole,
                                    const uint32_t* whole_words, uint32_t* bitmask,
                                    int32_t words_per_row) {
  __shared__ uint32_t m[kSliceWords];
  const int32_t b = blockIdx.y;
  const int32_t w0 = blockIdx.x * kSliceWords;
  const int32_t w1 = min(words_per_row, w0 + kSliceWords);
  const kernels::StoreView s = views[store_index[b]];
  uint32_t* out = bitmask + static_cast<size_t>(b) * words_per_row;
  if (whole[b] >= 0) {  // the CPU filled this row (the same for the whole block)
    const uint32_t* src = whole_words + whole[b];
    for (int32_t w = w0 + threadIdx.x; w < w1; w += blockDim.x) {
      out[w] = w < s.mask_words ? src[w] : 0u;
    }
    return;
  }
  for (int32_t w = threadIdx.x; w < w1 - w0; w += blockDim.x) m[w] = 0;
  __syncthreads();
  // Rows cover the store's own words; words past them (padding) stay 0.
  const int32_t row_end = min(w1, s.mask_words);
  // No barrier between rows: every update is a shared-memory atomicOr, so
  // each warp runs ahead through the rows and the global loads of different
  // rows overlap (a barrier per row made the kernel slower than one block
  // per session).
  for (int32_t k = row_begin[b]; k < row_begin[b + 1]; ++k) {
    const int32_t r = rows[k];
    switch (s.row_kind[r]) {
      case kernels::kRowList: {
        const int32_t* list = s.row_tokens + s.row_offset[r];
        const int32_t n = s.row_length[r];
        int32_t lo = 0, hi = n;
        if (n > 4 * static_cast<int32_t>(blockDim.x)) {
          // A long sorted list: its slice's part by binary search.
          lo = kernels::LowerBound(list, n, w0 << 5);
          hi = kernels::LowerBound(list, n, w1 << 5);
        }
        for (int32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
          const int32_t w = kernels::TokenWord(list[i]);
          if (w >= w0 && w < w1) atomicOr(&m[w - w0], kernels::TokenBit(list[i]));
        }
        break;
      }
      case kernels::kRowBitset:
        for (int32_t w = w0 + threadIdx.x; w < row_end; w += blockDim.x) {
          const uint32_t bits = kernels::OrBitsetWord(s, r, w);
          if (bits != 0) atomicOr(&m[w - w0], bits);
        }
        break;
      default:
        for (int32_t w = w0 + threadIdx.x; w < row_end; w += blockDim.x) {
          const uint32_t bits = kernels::OrComplementWord(s, r, w);
          if (bits != 0) atomicOr(&m[w - w0], bits);
        }
        break;
    }
  }
  if (eos[b]) {
    for (int32_t i = threadIdx.x; i < s.num_eos; i += blockDim.x) {
      const int32_t w = kernels::TokenWord(s.eos_ids[i]);
      if (w >= w0 && w < w1) atomicOr(&m[w - w0], kernels::TokenBit(s.eos_ids[i]));
    }
  }
  __syncthreads();
  // The session's filter: tokens cleared after every OR.
  for (int32_t k = clear_begin[b] + threadIdx.x; k < clear_begin[b + 1]; k += blockDim.x) {
    const int32_t w = kernels::TokenWord(clears[k]);
    if (w >= w0 && w < w1) atomicAnd(&m[w - w0], ~kernels::TokenBit(clears[k]));
  }
  __syncthreads();
  for (int32_t w = threadIdx.x; w < w1 - w0; w += blockDim.x) out[w0 + w] = m[w];
}

template <typename Bits>
__global__ void ApplyTokenBitmaskKernel(Bits* logits, int64_t total, int32_t vocab,
                                        const int32_t* bitmask, int32_t words_per_row,
                                        Bits neg_inf) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / vocab;
    const int32_t t = static_cast<int32_t>(i - b * vocab);
    const int32_t* mask = bitmask + b * words_per_row;
    logits[i] = kernels::ApplyMaskToLogit(logits[i], kernels::MaskAllows(mask, words_per_row, t),
                                          neg_inf);
  }
}

template <typename Bits>
Status LaunchApply(Bits* logits, int32_t batch, int32_t vocab, const int32_t* bitmask,
                   int32_t words_per_row, Bits neg_inf, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(batch) * vocab;
  if (total == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((total + kApplyThreads - 1) / kApplyThreads, 65535);
  ApplyTokenBitmaskKernel<Bits><<<static_cast<int>(blocks), kApplyThreads, 0, stream>>>(
      logits, total, vocab, bitmask, words_per_row, neg_inf);
  CFGMASK_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "ApplyTokenBitmaskKernel launch");
  return Status::Ok();
}

}  // namespace

bool CudaDeviceAvailable(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

Status CudaStore::Upload(const CompiledStore& store, std::unique_ptr<CudaStore>* out) {
  std::unique_ptr<CudaStore> d(new CudaStore());
  auto copy = [&](const void* src, size_t bytes, const char* what, const void** dst) -> Status {
    *dst = nullptr;
    if (bytes == 0) return Status::Ok();
    void* p = nullptr;
    CFGMASK_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes), what);
    d->buffers_.push_back(p);
    CFGMASK_CUDA_RETURN_IF_ERROR(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice), what);
    *dst = p;
    return Status::Ok();
  };
  const std::vector<uint32_t> text = TextTokenMask(store);
  kernels::StoreView& v = d->view_;
  v.vocab_size = store.vocab_size;
  v.mask_words = store.mask_words();
  v.num_rows = static_cast<int32_t>(store.row_kind.size());
  v.num_eos = static_cast<int32_t>(store.eos_ids.size());
  const void* p = nullptr;
  CFGMASK_RETURN_IF_ERROR(copy(store.row_kind.data(), store.row_kind.size() * 4, "row_kind", &p));
  v.row_kind = static_cast<const int32_t*>(p);
  CFGMASK_RETURN_IF_ERROR(
      copy(store.row_offset.data(), store.row_offset.size() * 4, "row_offset", &p));
  v.row_offset = static_cast<const int32_t*>(p);
  CFGMASK_RETURN_IF_ERROR(
      copy(store.row_length.data(), store.row_length.size() * 4, "row_length", &p));
  v.row_length = static_cast<const int32_t*>(p);
  CFGMASK_RETURN_IF_ERROR(
      copy(store.row_tokens.data(), store.row_tokens.size() * 4, "row_tokens", &p));
  v.row_tokens = static_cast<const int32_t*>(p);
  CFGMASK_RETURN_IF_ERROR(copy(store.row_bits.data(), store.row_bits.size() * 4, "row_bits", &p));
  v.row_bits = static_cast<const uint32_t*>(p);
  CFGMASK_RETURN_IF_ERROR(copy(text.data(), text.size() * 4, "text_mask", &p));
  v.text_mask = static_cast<const uint32_t*>(p);
  CFGMASK_RETURN_IF_ERROR(copy(store.eos_ids.data(), store.eos_ids.size() * 4, "eos_ids", &p));
  v.eos_ids = static_cast<const int32_t*>(p);
  *out = std::move(d);
  return Status::Ok();
}

CudaStore::~CudaStore() {
  for (void* p : buffers_) cudaFree(p);
}

CudaBatchMasker::~CudaBatchMasker() {
  if (copied_ != nullptr) {
    cudaEventSynchronize(static_cast<cudaEvent_t>(copied_));
    cudaEventDestroy(static_cast<cudaEvent_t>(copied_));
  }
  cudaFree(d_staging_);
  cudaFreeHost(h_staging_);
}

Status CudaBatchMasker::Reserve(size_t bytes) {
  if (bytes <= staging_cap_) return Status::Ok();
  const size_t want = std::max(bytes, 2 * staging_cap_ + 4096);
  cudaFree(d_staging_);
  cudaFreeHost(h_staging_);
  d_staging_ = h_staging_ = nullptr;
  staging_cap_ = 0;
  CFGMASK_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_staging_, want), "batch staging buffer");
  CFGMASK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&h_staging_, want), "pinned staging buffer");
  staging_cap_ = want;
  return Status::Ok();
}

Status CudaBatchMasker::FillNextTokenBitmask(std::span<Session* const> sessions,
                                             std::span<const CudaStore* const> stores,
                                             int32_t* device_bitmask, int32_t words_per_row,
                                             void* stream) {
  if (sessions.size() != stores.size()) {
    return Status(ErrorCode::kInvalidArgument, "FillNextTokenBitmask: sessions and stores differ in number");
  }
  CollectAcceptedRows(sessions, &rows_);
  return FillFromRows(rows_, stores, device_bitmask, words_per_row, stream);
}

Status CudaBatchMasker::FillFromRows(const BatchRows& rows, std::span<const CudaStore* const> stores,
                                     int32_t* device_bitmask, int32_t words_per_row,
                                     void* stream) {
  const int32_t batch = static_cast<int32_t>(stores.size());
  if (rows.row_begin.size() != stores.size() + 1 || rows.eos.size() != stores.size() ||
      rows.clear_begin.size() != stores.size() + 1 || rows.whole.size() != stores.size()) {
    return Status(ErrorCode::kInvalidArgument, "FillFromRows: rows and stores differ in number");
  }
  if (batch == 0) return Status::Ok();
  if (batch > 65535) {
    return Status(ErrorCode::kInvalidArgument, "FillFromRows: more than 65,535 sessions in a batch");
  }
  // One pinned staging buffer, one copy: the store views (8-byte aligned,
  // first), then row_begin (B+1) | store index (B) | eos (B) |
  // clear_begin (B+1) | whole (B) | rows | clears | whole_words.
  views_.clear();
  std::unordered_map<const CudaStore*, int32_t> index;
  std::vector<int32_t> store_index(batch);
  for (int32_t b = 0; b < batch; ++b) {
    if (stores[b] == nullptr) {
      return Status(ErrorCode::kInvalidArgument, "FillFromRows: null store at " + std::to_string(b));
    }
    if (stores[b]->device_view().mask_words > words_per_row) {
      return Status(ErrorCode::kInvalidArgument,
                    "FillFromRows: words_per_row too small for session " + std::to_string(b));
    }
    auto [it, fresh] = index.emplace(stores[b], static_cast<int32_t>(views_.size()));
    if (fresh) views_.push_back(stores[b]->device_view());
    store_index[b] = it->second;
  }
  const size_t views_bytes = views_.size() * sizeof(kernels::StoreView);
  for (int32_t b = 0; b < batch; ++b) {
    if (rows.whole[b] >= 0 &&
        static_cast<size_t>(rows.whole[b]) + stores[b]->device_view().mask_words >
            rows.whole_words.size()) {
      return Status(ErrorCode::kInvalidArgument,
                    "FillFromRows: session " + std::to_string(b) + "'s whole row is out of range");
    }
  }
  const size_t meta_ints = 2 * (batch + 1) + 3 * static_cast<size_t>(batch);
  const size_t ints = meta_ints + rows.rows.size() + rows.clears.size() + rows.whole_words.size();
  const size_t bytes = views_bytes + ints * 4;
  // The previous call's copy must be done before its pinned bytes change.
  if (copied_ != nullptr) {
    CFGMASK_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(copied_)),
                                 "wait for the previous staging copy");
  } else {
    cudaEvent_t e;
    CFGMASK_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                                 "staging event");
    copied_ = e;
  }
  CFGMASK_RETURN_IF_ERROR(Reserve(bytes));
  char* host = static_cast<char*>(h_staging_);
  std::memcpy(host, views_.data(), views_bytes);
  int32_t* meta = reinterpret_cast<int32_t*>(host + views_bytes);
  std::memcpy(meta, rows.row_begin.data(), (batch + 1) * 4);
  std::memcpy(meta + batch + 1, store_index.data(), batch * 4);
  for (int32_t b = 0; b < batch; ++b) meta[2 * batch + 1 + b] = rows.eos[b];
  std::memcpy(meta + 3 * batch + 1, rows.clear_begin.data(), (batch + 1) * 4);
  std::memcpy(meta + 4 * batch + 2, rows.whole.data(), batch * 4);
  int32_t* tail = meta + meta_ints;
  auto put = [&tail](const void* src, size_t n) {
    if (n > 0) std::memcpy(tail, src, n * 4);
    tail += n;
  };
  put(rows.rows.data(), rows.rows.size());
  put(rows.clears.data(), rows.clears.size());
  put(rows.whole_words.data(), rows.whole_words.size());

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  CFGMASK_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_staging_, h_staging_, bytes, cudaMemcpyHostToDevice, s), "copy batch rows");
  CFGMASK_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(copied_), s),
                               "record staging event");
  const char* dev = static_cast<const char*>(d_staging_);
  const int32_t* dmeta = reinterpret_cast<const int32_t*>(dev + views_bytes);
  const dim3 grid((words_per_row + kSliceWords - 1) / kSliceWords, batch);
  if (grid.x == 0) return Status::Ok();
  const int32_t* drows = dmeta + meta_ints;
  const int32_t* dclears = drows + rows.rows.size();
  const uint32_t* dwhole = reinterpret_cast<const uint32_t*>(dclears + rows.clears.size());
  OrSessionRowsKernel<<<grid, kOrThreads, 0, s>>>(
      reinterpret_cast<const kernels::StoreView*>(dev), dmeta + batch + 1, dmeta,
      dmeta + 2 * batch + 1, drows, dmeta + 3 * batch + 1, dclears, dmeta + 4 * batch + 2, dwhole,
      reinterpret_cast<uint32_t*>(device_bitmask), words_per_row);
  CFGMASK_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "OrSessionRowsKernel launch");
  return Status::Ok();
}

Status ApplyTokenBitmaskInplaceCuda(void* device_logits, LogitsDType dtype, int32_t batch,
                                    int32_t vocab, const int32_t* device_bitmask,
                                    int32_t words_per_row, void* stream) {
  if (batch < 0 || vocab < 0 || words_per_row < 0 ||
      (batch > 0 && (!device_logits || !device_bitmask))) {
    return Status(ErrorCode::kInvalidArgument, "ApplyTokenBitmaskInplaceCuda: bad shape or buffer");
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case LogitsDType::kFloat32:
      return LaunchApply(static_cast<uint32_t*>(device_logits), batch, vocab, device_bitmask,
                         words_per_row, kernels::kNegInfFloat32Bits, s);
    case LogitsDType::kFloat16:
      return LaunchApply(static_cast<uint16_t*>(device_logits), batch, vocab, device_bitmask,
                         words_per_row, kernels::kNegInfFloat16Bits, s);
    case LogitsDType::kBFloat16:
      return LaunchApply(static_cast<uint16_t*>(device_logits), batch, vocab, device_bitmask,
                         words_per_row, kernels::kNegInfBFloat16Bits, s);
  }
  return Status(ErrorCode::kInvalidArgument, "ApplyTokenBitmaskInplaceCuda: unknown dtype");
}

}  // namespace cfgmask
