// Benchmark of the serving runtime (not a test; numbers for docs/performance.md):
//
//  1. Memory bandwidth of this machine, measured in the same run, one
//     thread: memcpy of a large buffer (bytes copied per second, and the
//     STREAM "copy" count of bytes read + written) and a read-only AVX2
//     stream loop (the access pattern of an OR-reduction whose target mask
//     stays in cache).
//  2. CPU OR-reduction throughput (runtime/or_reduce.h, one thread) in GB/s
//     of row bytes read, for dense rows (bitsets) and complement rows, with
//     rows drawn at random from a store larger than the caches ("cold") and
//     from a few rows that stay in cache ("hot"), portable and AVX2 loops;
//     sparse rows in scattered ids per second.
//  3. Per-step batch fill (BatchMatcher::FillNextTokenBitmask) of B = 1, 16
//     and 128 sessions teacher-forced on standard-library modules with a
//     store file given by --store (python.lark with the Qwen2 tokenizer:
//     `cfgmask compile python.lark --tokenizer qwen2.gguf --start file_input
//     -o py-qwen2.cfgm`) or compiled here from --grammar and --tokenizer
//     (start file_input), in µs per session, split into the parser side
//     (CollectAcceptedRows) and the rest, and AdvanceBatch per session.
//  4. Session::Fork and Rollback(1) + Advance against history length.
//
// Usage: serving_bench [--store FILE.cfgm | --grammar G.lark --tokenizer TOK]
//                      [--mib N] [--steps N] [--texts N]
// Needs $CFGMASK_PYTHON (to find the standard library) for part 3.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/compile/compile.h"
#include "runtime/batch.h"
#include "runtime/or_reduce.h"
#include "runtime/session.h"
#include "tests/serving_corpus.h"

namespace cfgmask {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Best of `rounds` timings of fn().
template <typename F>
double BestSeconds(int rounds, F&& fn) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

__attribute__((target("avx2"))) uint64_t ReadStreamAvx2(const uint32_t* p, size_t words) {
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 32 <= words; i += 32) {
    for (size_t k = 0; k < 32; k += 8) {
      acc = _mm256_or_si256(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + k)));
    }
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  uint64_t x = lanes[0] | lanes[1] | lanes[2] | lanes[3];
  for (; i < words; ++i) x |= p[i];
  return x;
}

uint64_t ReadStreamPortable(const uint32_t* p, size_t words) {
  uint64_t x = 0;
  for (size_t i = 0; i < words; ++i) x |= p[i];
  return x;
}

struct Bandwidth {
  double memcpy_gbs = 0;     // bytes copied / s
  double copy_rw_gbs = 0;    // (read + written) / s
  double read_gbs = 0;       // bytes read / s
};

Bandwidth MeasureBandwidth(size_t mib) {
  const size_t bytes = mib << 20;
  std::vector<uint32_t> a(bytes / 4), b(bytes / 4);
  std::mt19937 rng(1);
  for (auto& x : a) x = rng();
  std::memset(b.data(), 1, bytes);
  Bandwidth bw;
  const double tc = BestSeconds(5, [&] { std::memcpy(b.data(), a.data(), bytes); });
  bw.memcpy_gbs = bytes / tc / 1e9;
  bw.copy_rw_gbs = 2 * bytes / tc / 1e9;
  volatile uint64_t sink = 0;
  const double tr = BestSeconds(5, [&] {
    sink = sink + (CpuHasAvx2() ? ReadStreamAvx2(a.data(), a.size())
                                : ReadStreamPortable(a.data(), a.size()));
  });
  bw.read_gbs = bytes / tr / 1e9;
  return bw;
}

// A synthetic store of `rows` rows of one kind at vocabulary v.
CompiledStore DenseStore(int32_t v, int32_t rows, RowKind kind, std::mt19937& rng) {
  CompiledStore s;
  s.vocab_size = v;
  s.token_special.assign(v, 0);
  s.token_special[v - 1] = 1;
  s.eos_ids = {v - 1};
  const int32_t words = s.mask_words();
  for (int32_t r = 0; r < rows; ++r) {
    s.row_seq.push_back(0);
    s.row_kind.push_back(static_cast<int32_t>(kind));
    if (kind == RowKind::kBitset) {
      s.row_offset.push_back(static_cast<int32_t>(s.row_bits.size()));
      s.row_length.push_back(words);
      for (int32_t w = 0; w < words; ++w) s.row_bits.push_back(rng() & rng());
    } else {
      // A list (or the exceptions of a complement) of about 1 id in 64.
      s.row_offset.push_back(static_cast<int32_t>(s.row_tokens.size()));
      int32_t n = 0;
      for (int32_t t = static_cast<int32_t>(rng() % 64); t < v - 1; t += 1 + rng() % 127) {
        s.row_tokens.push_back(t);
        ++n;
      }
      s.row_length.push_back(n);
    }
  }
  return s;
}

// Bytes a reduction of row r reads: its payload (a complement also reads
// the text mask, word by word).
double RowBytes(const CompiledStore& s, int32_t r) {
  switch (static_cast<RowKind>(s.row_kind[r])) {
    case RowKind::kBitset:
      return 4.0 * s.row_length[r];
    case RowKind::kComplement:
      return 4.0 * s.mask_words() + 4.0 * s.row_length[r];
    default:
      return 4.0 * s.row_length[r];
  }
}

// OR throughput over random sets of `per_call` rows drawn from [0, pool).
double OrThroughput(const CompiledStore& s, int32_t pool, int32_t per_call, OrIsa isa,
                    double seconds, double* per_call_us) {
  const std::vector<uint32_t> text = TextTokenMask(s);
  std::vector<uint32_t> mask(s.mask_words());
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> sets(256);
  std::vector<double> set_bytes(sets.size(), 0);
  for (size_t i = 0; i < sets.size(); ++i) {
    for (int32_t k = 0; k < per_call; ++k) {
      sets[i].push_back(static_cast<int32_t>(rng() % pool));
      set_bytes[i] += RowBytes(s, sets[i].back());
    }
  }
  double bytes = 0;
  int64_t calls = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int rep = 0; rep < 16; ++rep) {
      const size_t i = static_cast<size_t>(calls % static_cast<int64_t>(sets.size()));
      std::memset(mask.data(), 0, mask.size() * 4);
      OrRowsSimd(s, text.data(), sets[i].data(), sets[i].size(), mask.data(), isa);
      bytes += set_bytes[i];
      ++calls;
    }
    elapsed = Seconds(t0, Clock::now());
  }
  volatile uint32_t sink = mask[0];
  (void)sink;
  *per_call_us = elapsed / calls * 1e6;
  return bytes / elapsed / 1e9;
}

void BenchOrReduce(size_t mib) {
  std::printf("== memory bandwidth (one thread, %zu MiB buffers) ==\n", mib);
  const Bandwidth bw = MeasureBandwidth(mib);
  std::printf("memcpy: %.2f GB/s copied (%.2f GB/s read+written); read stream: %.2f GB/s\n",
              bw.memcpy_gbs, bw.copy_rw_gbs, bw.read_gbs);
  std::printf("AVX2 available: %s\n", CpuHasAvx2() ? "yes" : "no");

  const int32_t v = 151936;
  std::mt19937 rng(3);
  const int32_t row_bytes = ((v + 31) / 32) * 4;
  const int32_t cold_rows = static_cast<int32_t>((mib << 20) / row_bytes);
  std::printf("\n== CPU OR-reduction, V = %d (%d-byte rows), one thread ==\n", v, row_bytes);
  const CompiledStore bits = DenseStore(v, cold_rows, RowKind::kBitset, rng);
  const CompiledStore comp = DenseStore(v, 2048, RowKind::kComplement, rng);
  const CompiledStore list = DenseStore(v, 2048, RowKind::kList, rng);
  struct Case {
    const char* name;
    const CompiledStore* store;
    int32_t pool;
    int32_t per_call;
  };
  const Case cases[] = {
      {"bitset rows, cold (random rows of a store > caches)", &bits, cold_rows, 32},
      {"bitset rows, hot (8 rows, in cache)", &bits, 8, 8},
      {"complement rows (~1 id in 64 excluded), hot", &comp, 8, 8},
      {"list rows (~1 id in 64), hot", &list, 8, 8},
  };
  for (const Case& c : cases) {
    for (OrIsa isa : {OrIsa::kPortable, OrIsa::kAvx2}) {
      if (isa == OrIsa::kAvx2 && !CpuHasAvx2()) continue;
      double us = 0;
      const double gbs = OrThroughput(*c.store, c.pool, c.per_call, isa, 1.0, &us);
      std::printf("%-52s %-8s %7.2f GB/s  %5.0f%% of read stream  %5.0f%% of memcpy r+w  "
                  "(%.1f us per %d rows)\n",
                  c.name, isa == OrIsa::kAvx2 ? "avx2" : "portable", gbs, 100 * gbs / bw.read_gbs,
                  100 * gbs / bw.copy_rw_gbs, us, c.per_call);
    }
  }
}

// The store: read from `store_path`, or compiled from `grammar` (start
// file_input) and `tokenizer` when no path is given.
void BenchBatch(const std::string& store_path, const std::string& grammar,
                const std::string& tokenizer, int32_t steps, size_t num_texts) {
  CompiledStore store;
  const auto t0 = Clock::now();
  Status st;
  std::string name = store_path;
  if (!store_path.empty()) {
    st = ReadStoreFile(store_path, &store);
  } else {
    CompileOptions opt;
    opt.start = "file_input";
    st = CompileStore(grammar, tokenizer, opt, &store);
    name = grammar + " + " + tokenizer;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "serving_bench: %s: %s\n", name.c_str(), st.message().c_str());
    std::exit(2);
  }
  std::printf("\n== batch fill: %s (V = %d, %d rows), loaded in %.1f s ==\n", name.c_str(),
              store.vocab_size, static_cast<int32_t>(store.row_kind.size()),
              Seconds(t0, Clock::now()));
  const std::vector<ForcedText> texts =
      ForceTexts(&store, StdlibTexts(num_texts, 1500, 12000));
  if (texts.empty()) {
    std::fprintf(stderr, "serving_bench: no standard-library texts (set CFGMASK_PYTHON)\n");
    std::exit(2);
  }
  std::printf("%zu standard-library modules, %u threads\n", texts.size(),
              std::thread::hardware_concurrency());
  for (int32_t batch : {1, 16, 128}) {
    std::mt19937 rng(static_cast<uint32_t>(batch));
    struct Slot {
      const ForcedText* text;
      size_t pos;
      std::unique_ptr<Session> session;
    };
    std::vector<Slot> slots(batch);
    for (int32_t b = 0; b < batch; ++b) {
      Slot& s = slots[b];
      s.text = &texts[b % texts.size()];
      s.session = std::make_unique<Session>(&store);
      const size_t start = rng() % s.text->tokens.size();
      for (s.pos = 0; s.pos < start; ++s.pos) s.session->Advance(s.text->tokens[s.pos]);
    }
    const int32_t words = store.mask_words();
    std::vector<int32_t> bitmask(static_cast<size_t>(batch) * words);
    BatchMatcher matcher;
    BatchRows rows;
    std::vector<const CompiledStore*> stores(batch, &store);
    double fill = 0, collect = 0, advance = 0;
    int64_t accepted_rows = 0;
    for (int32_t step = 0; step < steps; ++step) {
      std::vector<Session*> sessions;
      for (Slot& s : slots) sessions.push_back(s.session.get());
      auto a = Clock::now();
      matcher.FillNextTokenBitmask(sessions, stores, bitmask.data(), words);
      auto b = Clock::now();
      CollectAcceptedRows(sessions, &rows);
      auto c = Clock::now();
      fill += Seconds(a, b);
      collect += Seconds(b, c);
      accepted_rows += static_cast<int64_t>(rows.rows.size());
      std::vector<Session*> moving;
      std::vector<int32_t> tokens;
      for (Slot& s : slots) {
        if (s.pos == s.text->tokens.size()) {
          s.session->Reset();
          s.pos = 0;
          continue;
        }
        moving.push_back(s.session.get());
        tokens.push_back(s.text->tokens[s.pos++]);
      }
      a = Clock::now();
      matcher.AdvanceBatch(moving, tokens);
      advance += Seconds(a, Clock::now());
    }
    const double n = static_cast<double>(steps) * batch;
    std::printf("B = %3d: fill %8.1f us/step = %6.1f us/session (parser side %6.1f us/session, "
                "%.1f rows), advance %6.1f us/session\n",
                batch, fill / steps * 1e6, fill / n * 1e6, collect / n * 1e6, accepted_rows / n,
                advance / n * 1e6);
  }

  std::printf("\n== fork and rollback against history length ==\n");
  const ForcedText& longest = *std::max_element(
      texts.begin(), texts.end(),
      [](const ForcedText& a, const ForcedText& b) { return a.tokens.size() < b.tokens.size(); });
  for (size_t len : {10, 100, 1000, 3000}) {
    if (len > longest.tokens.size()) break;
    Session s(&store);
    for (size_t i = 0; i < len; ++i) s.Advance(longest.tokens[i]);
    const int kReps = 200;
    const double fork = BestSeconds(3, [&] {
      for (int r = 0; r < kReps; ++r) {
        Session f = s.Fork();
        (void)f;
      }
    });
    const double roll = BestSeconds(3, [&] {
      for (int r = 0; r < kReps; ++r) {
        s.Rollback(1);
        s.Advance(longest.tokens[len - 1]);
      }
    });
    std::printf("history %5zu tokens: Fork %8.2f us, Rollback(1) + Advance %8.2f us\n", len,
                fork / kReps * 1e6, roll / kReps * 1e6);
  }
}

}  // namespace
}  // namespace cfgmask

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows when piped
  std::string store, grammar, tokenizer;
  size_t mib = 1024;
  int32_t steps = 100;
  size_t texts = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "serving_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--store") {
      store = next();
    } else if (a == "--grammar") {
      grammar = next();
    } else if (a == "--tokenizer") {
      tokenizer = next();
    } else if (a == "--mib") {
      mib = std::stoul(next());
    } else if (a == "--steps") {
      steps = std::stoi(next());
    } else if (a == "--texts") {
      texts = std::stoul(next());
    } else {
      std::fprintf(stderr, "serving_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  cfgmask::BenchOrReduce(mib);
  if (!store.empty() || (!grammar.empty() && !tokenizer.empty())) {
    cfgmask::BenchBatch(store, grammar, tokenizer, steps, texts);
  }
  return 0;
}
