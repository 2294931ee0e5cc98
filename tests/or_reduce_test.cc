// Tests of runtime/or_reduce.h: the SIMD reduction (portable and AVX2 loops)
// and the CPU twin of the CUDA OR kernel against the plain OrRows, on
// synthetic stores with random rows of every kind, for every vocabulary size
// 1..2048, then a sweep of odd and even sizes up to 200,000 (about every
// 500th under CFGMASK_QUICK=1, every 100th otherwise) and the sizes of real
// vocabularies.  Also prints the reduction speed at a Qwen2-sized
// vocabulary (tests/bench/serving_bench.cc measures it properly).
#include "runtime/or_reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/session.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {

// A sorted sample of `n` distinct ids from [0, v).
std::vector<int32_t> SortedSample(int32_t v, int32_t n, std::mt19937& rng) {
  std::vector<int32_t> out;
  if (n >= v / 2) {
    for (int32_t t = 0; t < v; ++t) {
      if (static_cast<int32_t>(rng() % v) < n) out.push_back(t);
    }
    return out;
  }
  std::vector<uint8_t> seen(v, 0);
  while (static_cast<int32_t>(out.size()) < n) {
    const int32_t t = static_cast<int32_t>(rng() % v);
    if (!seen[t]) {
      seen[t] = 1;
      out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Appends one row of `kind` with about `size` tokens (list, complement) or
// full/short bitset words.
void AddRow(CompiledStore* s, RowKind kind, int32_t size, std::mt19937& rng) {
  const int32_t v = s->vocab_size, words = s->mask_words();
  s->row_seq.push_back(0);
  s->row_kind.push_back(static_cast<int32_t>(kind));
  if (kind == RowKind::kBitset) {
    // Mostly full-width rows; sometimes shorter ones, which OrRows allows.
    const int32_t len = rng() % 4 == 0 ? static_cast<int32_t>(rng() % (words + 1)) : words;
    s->row_offset.push_back(static_cast<int32_t>(s->row_bits.size()));
    s->row_length.push_back(len);
    for (int32_t w = 0; w < len; ++w) {
      uint32_t bits = static_cast<uint32_t>(rng());
      if (w == words - 1 && v % 32 != 0) bits &= (1u << (v % 32)) - 1;
      s->row_bits.push_back(bits);
    }
    return;
  }
  const std::vector<int32_t> ids = SortedSample(v, std::min(size, v), rng);
  s->row_offset.push_back(static_cast<int32_t>(s->row_tokens.size()));
  s->row_length.push_back(static_cast<int32_t>(ids.size()));
  s->row_tokens.insert(s->row_tokens.end(), ids.begin(), ids.end());
}

CompiledStore RandomStore(int32_t v, int32_t num_rows, int32_t max_list, std::mt19937& rng) {
  CompiledStore s;
  s.vocab_size = v;
  s.token_special.assign(v, 0);
  for (int32_t t = 0; t < v; ++t) s.token_special[t] = rng() % 50 == 0;
  s.token_special[v - 1] = 1;  // a special id in the last word
  s.eos_ids.push_back(static_cast<int32_t>(rng() % v));
  s.eos_ids.push_back(v - 1);
  for (int32_t r = 0; r < num_rows; ++r) {
    const RowKind kind = static_cast<RowKind>(rng() % 3);
    const int32_t size = rng() % 8 == 0 ? 0 : static_cast<int32_t>(rng() % (max_list + 1));
    AddRow(&s, kind, size, rng);
  }
  return s;
}

std::vector<int32_t> RandomRowSet(int32_t num_rows, std::mt19937& rng) {
  std::vector<int32_t> rows;
  const int32_t n = static_cast<int32_t>(rng() % (num_rows + 1));
  for (int32_t i = 0; i < n; ++i) rows.push_back(static_cast<int32_t>(rng() % num_rows));
  return rows;
}

// Every fast reduction equals OrRows on `store` for `rows`.
void ExpectAllEqual(const CompiledStore& store, const std::vector<uint32_t>& text,
                    const std::vector<int32_t>& rows, std::mt19937& rng) {
  const int32_t words = store.mask_words();
  std::vector<uint32_t> want(words, 0);
  OrRows(store, rows.data(), rows.size(), want.data());

  std::vector<uint32_t> got(words, 0);
  OrRowsSimd(store, text.data(), rows.data(), rows.size(), got.data(), OrIsa::kPortable);
  ASSERT_EQ(got, want) << "portable, V=" << store.vocab_size;
  if (CpuHasAvx2()) {
    std::fill(got.begin(), got.end(), 0u);
    OrRowsSimd(store, text.data(), rows.data(), rows.size(), got.data(), OrIsa::kAvx2);
    ASSERT_EQ(got, want) << "avx2, V=" << store.vocab_size;
  }

  // The twin writes the whole padded row, EOS ids included on request.
  const kernels::StoreView view = HostStoreView(store, text.data());
  const int32_t pad = static_cast<int32_t>(rng() % 3);
  const bool eos = rng() % 2 == 0;
  std::vector<uint32_t> twin(words + pad, 0xDEADBEEFu);
  OrSessionRowsTwin(view, rows.data(), static_cast<int32_t>(rows.size()), eos, twin.data(),
                    words + pad);
  std::vector<uint32_t> want_twin = want;
  if (eos) {
    for (int32_t e : store.eos_ids) want_twin[e >> 5] |= 1u << (e & 31);
  }
  want_twin.resize(words + pad, 0);
  ASSERT_EQ(twin, want_twin) << "twin, V=" << store.vocab_size << " eos=" << eos;
}

TEST(OrReduceTest, EveryVocabularySizeUpTo2048) {
  std::mt19937 rng(1234);
  for (int32_t v = 1; v <= 2048; ++v) {
    const CompiledStore store = RandomStore(v, 8, std::max(1, v / 4), rng);
    const std::vector<uint32_t> text = TextTokenMask(store);
    for (int trial = 0; trial < 3; ++trial) {
      ExpectAllEqual(store, text, RandomRowSet(8, rng), rng);
      if (HasFatalFailure()) return;
    }
  }
}

// Sizes above 2048: a sweep alternating odd and even sizes, every word
// remainder (V mod 32) and AVX2 tail length (words mod 8) hit many times,
// plus real vocabulary sizes and the ends of the range.
std::vector<int32_t> SweepSizes() {
  // Even strides keep the parity alternating; the even jitter spreads V mod 32.
  const int32_t stride = TestQuick() ? 498 : 98;
  std::vector<int32_t> sizes;
  for (int32_t k = 0;; ++k) {
    const int32_t v = 2049 + k * stride + (k % 2) + 2 * ((k * 5) % 16);
    if (v > 200000) break;
    sizes.push_back(v);
  }
  for (int32_t v : {4095, 4096, 32000, 32001, 50257, 65535, 65536, 100000, 128256, 151936,
                    151937, 152064, 199999, 200000}) {
    sizes.push_back(v);
  }
  return sizes;
}

TEST(OrReduceTest, SweepUpTo200000) {
  std::mt19937 rng(99);
  const std::vector<int32_t> sizes = SweepSizes();
  int32_t odd = 0;
  for (int32_t v : sizes) {
    odd += v % 2;
    const CompiledStore store = RandomStore(v, 12, 3000, rng);
    const std::vector<uint32_t> text = TextTokenMask(store);
    for (int trial = 0; trial < 2; ++trial) {
      ExpectAllEqual(store, text, RandomRowSet(12, rng), rng);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(odd, 50);
  EXPECT_GT(static_cast<int32_t>(sizes.size()) - odd, 50);
}

TEST(OrReduceTest, TextTokenMaskSkipsSpecialTokens) {
  std::mt19937 rng(5);
  const CompiledStore store = RandomStore(1000, 1, 1, rng);
  const std::vector<uint32_t> text = TextTokenMask(store);
  for (int32_t t = 0; t < store.vocab_size; ++t) {
    EXPECT_EQ(((text[t >> 5] >> (t & 31)) & 1) != 0, store.token_special[t] == 0) << t;
  }
  for (int32_t t = store.vocab_size; t < 32 * store.mask_words(); ++t) {
    EXPECT_EQ((text[t >> 5] >> (t & 31)) & 1, 0u) << t;
  }
}

// Reduction speed at V = 151,936 (Qwen2) with 50 list rows (up to 2,000 ids)
// and 5 bitset rows; the masks must agree as everywhere else.
TEST(OrReduceTest, SpeedAtQwenVocabulary) {
  std::mt19937 rng(7);
  CompiledStore store;
  store.vocab_size = 151936;
  store.token_special.assign(store.vocab_size, 0);
  for (int32_t r = 0; r < 50; ++r) AddRow(&store, RowKind::kList, 1 + rng() % 2000, rng);
  for (int32_t r = 0; r < 5; ++r) {
    store.row_seq.push_back(0);
    store.row_kind.push_back(static_cast<int32_t>(RowKind::kBitset));
    store.row_offset.push_back(static_cast<int32_t>(store.row_bits.size()));
    store.row_length.push_back(store.mask_words());
    for (int32_t w = 0; w < store.mask_words(); ++w) store.row_bits.push_back(rng());
  }
  const std::vector<uint32_t> text = TextTokenMask(store);
  std::vector<int32_t> rows(55);
  for (int32_t r = 0; r < 55; ++r) rows[r] = r;
  const int32_t words = store.mask_words();
  std::vector<uint32_t> want(words, 0);
  OrRows(store, rows.data(), rows.size(), want.data());

  // Best of several rounds, so that a busy machine does not decide.
  auto time_us = [&](auto&& fill) {
    std::vector<uint32_t> m(words);
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      const int kIters = 100;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kIters; ++i) {
        std::fill(m.begin(), m.end(), 0u);
        fill(m.data());
      }
      const auto t1 = std::chrono::steady_clock::now();
      best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / kIters);
    }
    EXPECT_EQ(m, want);
    return best;
  };
  // The dense rows alone show the word-wise loops.
  auto report = [&](const char* what, const std::vector<int32_t>& rs) {
    want.assign(words, 0);
    OrRows(store, rs.data(), rs.size(), want.data());
    const double plain = time_us([&](uint32_t* m) { OrRows(store, rs.data(), rs.size(), m); });
    const double portable = time_us([&](uint32_t* m) {
      OrRowsSimd(store, text.data(), rs.data(), rs.size(), m, OrIsa::kPortable);
    });
    std::printf("V=151936, %s: OrRows %.1f us, portable %.1f us", what, plain, portable);
    if (CpuHasAvx2()) {
      const double avx2 = time_us([&](uint32_t* m) {
        OrRowsSimd(store, text.data(), rs.data(), rs.size(), m, OrIsa::kAvx2);
      });
      std::printf(", avx2 %.1f us", avx2);
    }
    std::printf(" per mask\n");
  };
  report("50 list + 5 bitset rows", rows);
  report("5 bitset rows", std::vector<int32_t>(rows.begin() + 50, rows.end()));
}

}  // namespace
}  // namespace cfgmask
