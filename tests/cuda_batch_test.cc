// Tests of runtime/cuda_batch.h: the CUDA OR kernel against its CPU twin
// (OrSessionRowsTwin) on synthetic stores with rows of every kind (one
// mask slice and many), the whole CUDA batch path against
// Session::FillMask on teacher-forced sessions over two real stores, and the
// logits kernel against ApplyTokenBitmaskInplaceCpu for fp32/fp16/bf16.
// Skips, saying why, when the build has no CUDA or the machine no GPU.
#include <gtest/gtest.h>

#ifdef CFGMASK_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "runtime/batch.h"
#include "runtime/cuda_batch.h"
#include "runtime/or_reduce.h"
#include "runtime/session.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {

#define REQUIRE_GPU()                                                           \
  do {                                                                          \
    std::string why;                                                            \
    if (!CudaDeviceAvailable(&why)) {                                           \
      GTEST_SKIP() << "CUDA kernels not run: " << why;                          \
    }                                                                           \
  } while (0)

#define REQUIRE_ENV(var)                                                       \
  do {                                                                         \
    if (TestEnv(var).empty()) {                                                \
      if (TestEnv("CI") == "true") FAIL() << var " is not set (run setup.sh)"; \
      GTEST_SKIP() << var " is not set";                                       \
    }                                                                          \
  } while (0)

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// A device buffer of T, freed on scope exit.
template <typename T>
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
  T* ptr = nullptr;
};

CompiledStore RandomStore(int32_t v, int32_t num_rows, std::mt19937& rng) {
  CompiledStore s;
  s.vocab_size = v;
  s.token_special.assign(v, 0);
  for (int32_t t = 0; t < v; ++t) s.token_special[t] = rng() % 50 == 0;
  s.eos_ids = {static_cast<int32_t>(rng() % v), v - 1};
  const int32_t words = s.mask_words();
  for (int32_t r = 0; r < num_rows; ++r) {
    const int32_t kind = static_cast<int32_t>(rng() % 3);
    s.row_seq.push_back(0);
    s.row_kind.push_back(kind);
    if (kind == static_cast<int32_t>(RowKind::kBitset)) {
      const int32_t len = rng() % 4 == 0 ? static_cast<int32_t>(rng() % (words + 1)) : words;
      s.row_offset.push_back(static_cast<int32_t>(s.row_bits.size()));
      s.row_length.push_back(len);
      for (int32_t w = 0; w < len; ++w) {
        uint32_t bits = static_cast<uint32_t>(rng());
        if (w == words - 1 && v % 32 != 0) bits &= (1u << (v % 32)) - 1;
        s.row_bits.push_back(bits);
      }
      continue;
    }
    std::vector<int32_t> ids;
    const uint32_t keep = 1 + rng() % 64;  // about v / keep ids
    for (int32_t t = 0; t < v; ++t) {
      if (rng() % keep == 0) ids.push_back(t);
    }
    s.row_offset.push_back(static_cast<int32_t>(s.row_tokens.size()));
    s.row_length.push_back(static_cast<int32_t>(ids.size()));
    s.row_tokens.insert(s.row_tokens.end(), ids.begin(), ids.end());
  }
  return s;
}

// The vocabulary sizes of the CPU tests (or_reduce_test.cc's sweeps: every
// size to 2048, then a sweep over every word remainder to 200,000 with the
// real vocabularies), plus Gemma's 262,144 and 400,001 (wider than a block's
// shared memory could hold whole: the OR kernel works in slices of 1,024
// words).  `every` thins the dense part for the sanitizer run.
std::vector<int32_t> GpuSweepSizes(int32_t every) {
  std::vector<int32_t> sizes;
  for (int32_t v = 1; v <= 2048; v += every) sizes.push_back(v);
  const int32_t stride = 498 * every;  // or_reduce_test's quick stride: random stores this wide are slow to make
  for (int32_t k = 0;; ++k) {
    const int32_t v = 2049 + k * stride + (k % 2) + 2 * ((k * 5) % 16);
    if (v > 200000) break;
    sizes.push_back(v);
  }
  for (int32_t v : {4095, 4096, 32000, 32001, 50257, 65535, 65536, 100000, 128256, 151936, 151937,
                    152064, 199999, 200000, 262144, 400001}) {
    sizes.push_back(v);
  }
  return sizes;
}

template <typename Bits>
void CheckApplyKernel(LogitsDType dtype, const std::vector<int32_t>& vocabs);

// The OR kernel against OrSessionRowsTwin + FinishBatchRow on random stores
// of vocabulary v, a batch of 9 sessions over two stores (with random
// filters: tokens cleared, rows the CPU filled whole), at the store's own
// row width, a padded one, and one of 12,289 words (13 slices, the last one
// short).
void CheckOrKernel(int32_t v, std::mt19937& rng) {
  {
    std::vector<CompiledStore> host = {RandomStore(v, 10, rng), RandomStore(v / 2 + 1, 10, rng)};
    std::vector<std::unique_ptr<CudaStore>> device(2);
    std::vector<std::vector<uint32_t>> text;
    for (int i = 0; i < 2; ++i) {
      Status st = CudaStore::Upload(host[i], &device[i]);
      ASSERT_TRUE(st.ok()) << st.message();
      text.push_back(TextTokenMask(host[i]));
    }
    const int32_t batch = 9;
    BatchRows rows;
    rows.row_begin.push_back(0);
    rows.clear_begin.push_back(0);
    std::vector<const CudaStore*> stores;
    for (int32_t b = 0; b < batch; ++b) {
      stores.push_back(device[b % 2].get());
      const int32_t vb = host[b % 2].vocab_size;
      // A session's filter: some rows come whole from the CPU, the others
      // with tokens to clear (in and out of the rows' OR, repeated too).
      const bool whole = rng() % 4 == 0;
      const int32_t n = whole ? 0 : static_cast<int32_t>(rng() % 12);
      for (int32_t i = 0; i < n; ++i) rows.rows.push_back(static_cast<int32_t>(rng() % 10));
      rows.row_begin.push_back(static_cast<int32_t>(rows.rows.size()));
      rows.eos.push_back(whole ? 0 : rng() % 2);
      const int32_t c = whole ? 0 : static_cast<int32_t>(rng() % 40);
      for (int32_t i = 0; i < c; ++i) rows.clears.push_back(static_cast<int32_t>(rng() % vb));
      if (c > 0 && rng() % 2 == 0) rows.clears.push_back(vb - 1);
      rows.clear_begin.push_back(static_cast<int32_t>(rows.clears.size()));
      rows.whole.push_back(whole ? static_cast<int32_t>(rows.whole_words.size()) : -1);
      if (whole) {
        for (int32_t w = 0; w < host[b % 2].mask_words(); ++w) {
          uint32_t bits = static_cast<uint32_t>(rng());
          if (w == host[b % 2].mask_words() - 1 && vb % 32 != 0) bits &= (1u << (vb % 32)) - 1;
          rows.whole_words.push_back(bits);
        }
      }
    }
    for (int32_t words_per_row :
         {host[0].mask_words(), host[0].mask_words() + 5, std::max(host[0].mask_words(), 12289)}) {
      DeviceBuffer<int32_t> d_mask(static_cast<size_t>(batch) * words_per_row);
      ASSERT_CUDA(cudaMemset(d_mask.ptr, 0xAB, sizeof(int32_t) * batch * words_per_row));
      CudaBatchMasker masker;
      Status st = masker.FillFromRows(rows, stores, d_mask.ptr, words_per_row);
      ASSERT_TRUE(st.ok()) << st.message();
      std::vector<uint32_t> got(static_cast<size_t>(batch) * words_per_row);
      ASSERT_CUDA(cudaMemcpy(got.data(), d_mask.ptr, got.size() * 4, cudaMemcpyDeviceToHost));
      std::vector<uint32_t> want(words_per_row);
      for (int32_t b = 0; b < batch; ++b) {
        const kernels::StoreView view = HostStoreView(host[b % 2], text[b % 2].data());
        OrSessionRowsTwin(view, rows.rows.data() + rows.row_begin[b],
                          rows.row_begin[b + 1] - rows.row_begin[b], rows.eos[b] != 0, want.data(),
                          words_per_row);
        FinishBatchRow(rows, b, host[b % 2].mask_words(), want.data(), words_per_row);
        ASSERT_EQ(std::vector<uint32_t>(got.begin() + static_cast<size_t>(b) * words_per_row,
                                        got.begin() + static_cast<size_t>(b + 1) * words_per_row),
                  want)
            << "V=" << v << " words_per_row=" << words_per_row << " session " << b;
      }
    }
  }
}

TEST(CudaBatchTest, OrKernelMatchesTwinOnSyntheticStores) {
  REQUIRE_GPU();
  std::mt19937 rng(17);
  for (int32_t v : GpuSweepSizes(1)) {
    CheckOrKernel(v, rng);
    if (HasFatalFailure()) return;
  }
}

// A few sizes of each kind, small enough for compute-sanitizer's memcheck
// and racecheck (tests/gpu/run.sh runs this case under both): the OR kernel
// on one slice and on several, and the masking kernel in every dtype.
TEST(CudaBatchTest, SanitizerSmallCase) {
  REQUIRE_GPU();
  std::mt19937 rng(29);
  for (int32_t v : {1, 33, 2049, 32001}) {
    CheckOrKernel(v, rng);
    if (HasFatalFailure()) return;
  }
  CheckApplyKernel<uint32_t>(LogitsDType::kFloat32, {1, 33, 32001});
  CheckApplyKernel<uint16_t>(LogitsDType::kFloat16, {33});
  CheckApplyKernel<uint16_t>(LogitsDType::kBFloat16, {33});
}

TEST(CudaBatchTest, SessionsMatchFillMask) {
  REQUIRE_GPU();
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* host[2];
  std::unique_ptr<CudaStore> device[2];
  const char* grammars[2] = {"json.lark", "traps.lark"};
  for (int i = 0; i < 2; ++i) {
    Status st;
    host[i] = CachedTestStore(std::string(CFGMASK_SOURCE_DIR) + "/tests/data/engine/" + grammars[i],
                              TestEnv("CFGMASK_TOK_LLAMA_SPM"), "", &st);
    ASSERT_TRUE(host[i] != nullptr) << st.message();
    st = CudaStore::Upload(*host[i], &device[i]);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  const int32_t batch = 16, steps = 20;
  std::vector<Session> owned;
  for (int32_t b = 0; b < batch; ++b) owned.emplace_back(host[b % 2]);
  std::vector<Session*> sessions;
  std::vector<const CudaStore*> stores;
  for (int32_t b = 0; b < batch; ++b) {
    sessions.push_back(&owned[b]);
    stores.push_back(device[b % 2].get());
  }
  const int32_t words_per_row = std::max(host[0]->mask_words(), host[1]->mask_words());
  DeviceBuffer<int32_t> d_mask(static_cast<size_t>(batch) * words_per_row);
  CudaBatchMasker masker;
  BatchMatcher matcher;
  std::mt19937 rng(23);
  std::vector<uint32_t> got(static_cast<size_t>(batch) * words_per_row);
  for (int32_t step = 0; step < steps; ++step) {
    Status st = masker.FillNextTokenBitmask(sessions, stores, d_mask.ptr, words_per_row);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_CUDA(cudaMemcpy(got.data(), d_mask.ptr, got.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<int32_t> tokens(batch);
    for (int32_t b = 0; b < batch; ++b) {
      std::vector<uint32_t> want = sessions[b]->Mask();
      want.resize(words_per_row, 0);
      ASSERT_EQ(std::vector<uint32_t>(got.begin() + static_cast<size_t>(b) * words_per_row,
                                      got.begin() + static_cast<size_t>(b + 1) * words_per_row),
                want)
          << "session " << b << " step " << step;
      std::vector<int32_t> allowed;
      const CompiledStore& s = *host[b % 2];
      for (int32_t t = 0; t < s.vocab_size; ++t) {
        if (((want[t >> 5] >> (t & 31)) & 1) &&
            std::find(s.eos_ids.begin(), s.eos_ids.end(), t) == s.eos_ids.end()) {
          allowed.push_back(t);
        }
      }
      // A session that can only end starts over and sits this step out.
      if (allowed.empty()) {
        sessions[b]->Reset();
        tokens[b] = -1;
      } else {
        tokens[b] = allowed[rng() % allowed.size()];
      }
    }
    std::vector<Session*> moving;
    std::vector<int32_t> moving_tokens;
    for (int32_t b = 0; b < batch; ++b) {
      if (tokens[b] >= 0) {
        moving.push_back(sessions[b]);
        moving_tokens.push_back(tokens[b]);
      }
    }
    st = matcher.AdvanceBatch(moving, moving_tokens);
    ASSERT_TRUE(st.ok()) << st.message();
  }
}

template <typename Bits>
void CheckApplyKernel(LogitsDType dtype, const std::vector<int32_t>& vocabs) {
  std::mt19937 rng(static_cast<uint32_t>(dtype) + 3);
  for (int32_t vocab : vocabs) {
    const int32_t batch = 5;
    // Even sizes: logits padded past the mask (a model vocabulary wider than
    // its tokenizer's), whose extra columns must become -inf.
    const int32_t covered = vocab % 2 == 0 && vocab > 64 ? vocab - vocab / 64 : vocab;
    const int32_t words = (covered + 31) / 32;
    std::vector<int32_t> bitmask(static_cast<size_t>(batch) * words);
    for (int32_t& w : bitmask) w = static_cast<int32_t>(rng());
    std::vector<Bits> logits(static_cast<size_t>(batch) * vocab);
    for (Bits& x : logits) x = static_cast<Bits>(rng());
    DeviceBuffer<int32_t> d_mask(bitmask.size());
    DeviceBuffer<Bits> d_logits(logits.size());
    ASSERT_CUDA(cudaMemcpy(d_mask.ptr, bitmask.data(), bitmask.size() * 4, cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemcpy(d_logits.ptr, logits.data(), logits.size() * sizeof(Bits),
                           cudaMemcpyHostToDevice));
    Status st = ApplyTokenBitmaskInplaceCuda(d_logits.ptr, dtype, batch, vocab, d_mask.ptr, words);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<Bits> got(logits.size());
    ASSERT_CUDA(cudaMemcpy(got.data(), d_logits.ptr, got.size() * sizeof(Bits),
                           cudaMemcpyDeviceToHost));
    st = ApplyTokenBitmaskInplaceCpu(logits.data(), dtype, batch, vocab, bitmask.data(), words);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(got, logits) << "dtype " << static_cast<int>(dtype) << " vocab " << vocab;
  }
}

TEST(CudaBatchTest, ApplyKernelMatchesTwin) {
  REQUIRE_GPU();
  const std::vector<int32_t> sizes = GpuSweepSizes(TestQuick() ? 97 : 7);
  CheckApplyKernel<uint32_t>(LogitsDType::kFloat32, sizes);
  CheckApplyKernel<uint16_t>(LogitsDType::kFloat16, sizes);
  CheckApplyKernel<uint16_t>(LogitsDType::kBFloat16, sizes);
}

}  // namespace
}  // namespace cfgmask

#else  // !CFGMASK_HAVE_CUDA

TEST(CudaBatchTest, BuiltWithoutCuda) {
  GTEST_SKIP() << "CUDA kernels not built (CFGMASK_CUDA is OFF or nvcc was not found)";
}

#endif  // CFGMASK_HAVE_CUDA
