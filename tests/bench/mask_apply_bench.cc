// Logits masking on the CPU (ApplyTokenBitmaskInplaceCpu, what
// apply_token_bitmask_inplace and the logits processors call): one row of
// logits per call, vocabularies of 32k to 256k, masks that allow almost
// nothing, half the tokens at random, or almost everything, fp32 and fp16;
// and the strided row that llama-cpp-python hands over (ApplyTokenBitmask-
// StridedCpu: the float32 logit field of (int32 id, float32 logit, float32
// p) records, a stride of 3 elements).
// Not a test: run build/tests/mask_apply_bench (Google Benchmark).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/batch.h"

namespace cfgmask {
namespace {

template <typename Bits>
void BM_Apply(benchmark::State& state, LogitsDType dtype) {
  const int32_t vocab = static_cast<int32_t>(state.range(0));
  const double density = static_cast<double>(state.range(1)) / 1000.0;
  const int32_t words = (vocab + 31) / 32;
  std::mt19937 rng(7);
  std::bernoulli_distribution allow(density);
  std::vector<int32_t> mask(words, 0);
  for (int32_t t = 0; t < vocab; ++t) {
    if (allow(rng)) mask[t >> 5] |= static_cast<int32_t>(1u << (t & 31));
  }
  std::vector<Bits> logits(vocab);
  for (Bits& x : logits) x = static_cast<Bits>(rng());
  for (auto _ : state) {
    Status st = ApplyTokenBitmaskInplaceCpu(logits.data(), dtype, 1, vocab, mask.data(), words);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(vocab) * sizeof(Bits));
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t vocab : {32000, 49152, 151936, 262144}) {
    for (int64_t per_mille : {1, 100, 500, 990}) b->Args({vocab, per_mille});
  }
}

void BM_ApplyStridedFloat32(benchmark::State& state) {
  const int32_t vocab = static_cast<int32_t>(state.range(0));
  const double density = static_cast<double>(state.range(1)) / 1000.0;
  const int32_t words = (vocab + 31) / 32;
  const int64_t stride = 3;
  std::mt19937 rng(7);
  std::bernoulli_distribution allow(density);
  std::vector<int32_t> mask(words, 0);
  for (int32_t t = 0; t < vocab; ++t) {
    if (allow(rng)) mask[t >> 5] |= static_cast<int32_t>(1u << (t & 31));
  }
  std::vector<uint32_t> records(static_cast<size_t>(vocab) * stride);
  for (uint32_t& x : records) x = static_cast<uint32_t>(rng());
  for (auto _ : state) {
    Status st = ApplyTokenBitmaskStridedCpu(records.data() + 1, LogitsDType::kFloat32, vocab,
                                            stride, mask.data(), words);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(vocab) * 4);
}

void BM_ApplyFloat32(benchmark::State& s) { BM_Apply<uint32_t>(s, LogitsDType::kFloat32); }
void BM_ApplyFloat16(benchmark::State& s) { BM_Apply<uint16_t>(s, LogitsDType::kFloat16); }
BENCHMARK(BM_ApplyFloat32)->Apply(Sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyFloat16)->Apply(Sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyStridedFloat32)->Apply(Sizes)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace cfgmask

BENCHMARK_MAIN();
