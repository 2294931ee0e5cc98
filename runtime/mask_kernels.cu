// CUDA kernels of the batch API (cuda_batch.h) and their host wrappers.
//
// OrSessionRowsKernel: one thread block per session.  The block zeroes the
// session's mask (in shared memory when words_per_row words fit in 48 KiB,
// otherwise directly in the output row), then walks the session's accepted
// rows in order; the threads of the block share each row's iterations
// (mask_kernels.h: a listed token, a bitset word, or a complement word) and
// atomicOr their bits into the mask; EOS ids last; then the mask is copied
// out.  ApplyTokenBitmaskKernel: one thread per logit, raw bits of the dtype.
// The CPU twins are OrSessionRowsTwin (or_reduce.h) and
// ApplyTokenBitmaskInplaceCpu (batch.h).  Tested by cuda_batch_test.cc.
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
constexpr int kApplyThreads = 256;
constexpr size_t kMaxStaticShared = 48 * 1024;

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
                                    const int32_t* rows, uint32_t* bitmask, int32_t words_per_row,
                                    bool use_shared) {
  extern __shared__ uint32_t shared_mask[];
  const int32_t b = blockIdx.x;
  const kernels::StoreView s = views[store_index[b]];
  uint32_t* out = bitmask + static_cast<size_t>(b) * words_per_row;
  uint32_t* m = use_shared ? shared_mask : out;
  for (int32_t w = threadIdx.x; w < words_per_row; w += blockDim.x) m[w] = 0;
  __syncthreads();
  for (int32_t k = row_begin[b]; k < row_begin[b + 1]; ++k) {
    const int32_t r = rows[k];
    const int32_t iterations = kernels::RowIterations(s, r);
    for (int32_t i = threadIdx.x; i < iterations; i += blockDim.x) {
      uint32_t bits = 0;
      const int32_t w = kernels::OrRowIteration(s, r, i, &bits);
      if (bits != 0) atomicOr(&m[w], bits);
    }
  }
  if (eos[b]) {
    for (int32_t i = threadIdx.x; i < s.num_eos; i += blockDim.x) {
      atomicOr(&m[kernels::TokenWord(s.eos_ids[i])], kernels::TokenBit(s.eos_ids[i]));
    }
  }
  if (use_shared) {
    __syncthreads();
    for (int32_t w = threadIdx.x; w < words_per_row; w += blockDim.x) out[w] = m[w];
  }
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
  cudaFree(d_rows_);
  cudaFree(d_meta_);
  cudaFree(d_views_);
}

Status CudaBatchMasker::Reserve(size_t bytes, void** buffer, size_t* capacity) {
  if (bytes <= *capacity) return Status::Ok();
  const size_t want = std::max(bytes, 2 * *capacity + 256);
  cudaFree(*buffer);
  *buffer = nullptr;
  *capacity = 0;
  CFGMASK_CUDA_RETURN_IF_ERROR(cudaMalloc(buffer, want), "batch staging buffer");
  *capacity = want;
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
  if (rows.row_begin.size() != stores.size() + 1 || rows.eos.size() != stores.size()) {
    return Status(ErrorCode::kInvalidArgument, "FillFromRows: rows and stores differ in number");
  }
  if (batch == 0) return Status::Ok();
  // meta_: row_begin (B+1) | store index (B) | eos (B).
  meta_.assign(rows.row_begin.begin(), rows.row_begin.end());
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
  meta_.insert(meta_.end(), store_index.begin(), store_index.end());
  for (int32_t b = 0; b < batch; ++b) meta_.push_back(rows.eos[b]);

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  CFGMASK_RETURN_IF_ERROR(Reserve(std::max<size_t>(rows.rows.size(), 1) * 4, &d_rows_, &rows_cap_));
  CFGMASK_RETURN_IF_ERROR(Reserve(meta_.size() * 4, &d_meta_, &meta_cap_));
  CFGMASK_RETURN_IF_ERROR(
      Reserve(views_.size() * sizeof(kernels::StoreView), &d_views_, &views_cap_));
  if (!rows.rows.empty()) {
    CFGMASK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_rows_, rows.rows.data(), rows.rows.size() * 4,
                                                 cudaMemcpyHostToDevice, s),
                                 "copy rows");
  }
  CFGMASK_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_meta_, meta_.data(), meta_.size() * 4, cudaMemcpyHostToDevice, s),
      "copy batch metadata");
  CFGMASK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_views_, views_.data(),
                                               views_.size() * sizeof(kernels::StoreView),
                                               cudaMemcpyHostToDevice, s),
                               "copy store views");
  const int32_t* meta = static_cast<const int32_t*>(d_meta_);
  const size_t shared = static_cast<size_t>(words_per_row) * 4;
  const bool use_shared = shared <= kMaxStaticShared;
  OrSessionRowsKernel<<<batch, kOrThreads, use_shared ? shared : 0, s>>>(
      static_cast<const kernels::StoreView*>(d_views_), meta + batch + 1, meta, meta + 2 * batch + 1,
      static_cast<const int32_t*>(d_rows_), reinterpret_cast<uint32_t*>(device_bitmask),
      words_per_row, use_shared);
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
