// Per-step cost of the batch runtime at serving sizes, CPU against GPU (the
// GPU kit's benchmark, tests/gpu/run.sh; docs/gpu.md has its table).
//
// For each store given (one per vocabulary) and each batch size B, B
// sessions are teacher-forced on standard-library modules (serving_corpus.h:
// greedy segmentation, every token accepted), each starting at a different
// module and offset, and advanced together one token per step.  Two such
// batches walk in lockstep, one for each path, so that neither reads rows
// the other's step left in the row memo.  Per step it times:
//   cpu_fill  BatchMatcher::FillNextTokenBitmask into a host bitmask: the
//             parser side plus the OR of the rows on the CPU (CPU path)
//   parser    CollectAcceptedRows: every session's accepted store rows, the
//             parser side alone (GPU path)
//   h2d       the host bitmask copied to the device (pinned memory), the
//             path where the CPU fills and the GPU only masks
//   gpu_or    CudaBatchMasker::FillFromRows from those rows: row ids to the
//             device and the OR-reduction kernel, synchronised
//   apply_f32 / apply_bf16
//             ApplyTokenBitmaskInplaceCuda on B x V logits, synchronised
//   cpu_apply ApplyTokenBitmaskInplaceCpu on B x V float32 logits (the CPU
//             masking that a server without a GPU pays)
// and checks, every step, that the GPU bitmask equals the CPU one bit for
// bit (a benchmark that checks: a mismatch exits 1).  A step of the CPU path
// costs cpu_fill + h2d + apply, one of the GPU path parser + gpu_or + apply;
// the CPU-fill share of the first, cpu_fill / (cpu_fill + h2d + apply_f32),
// is what says whether the engine keeps up with the GPU.
//
// Built without CUDA (CFGMASK_CUDA off, or no GPU on the machine), it times
// the CPU columns only: tests/gpu/run.sh --cpu runs it that way in CI so the
// kit cannot rot.
//
// Usage: cuda_batch_bench --store NAME=FILE.cfgm [--store ...]
//                         [--batches 1,16,64,256] [--steps N] [--warmup N]
//                         [--threads 0,1] [--json OUT.json]
// --threads: CPU thread counts to run each batch with (0: every core).
// Needs $CFGMASK_PYTHON or $CFGMASK_STDLIB (serving_corpus.h) for the texts.
// Not a test; the kernels are tested by cuda_batch_test.cc.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "maskstore/compiled_store.h"
#include "runtime/batch.h"
#include "runtime/or_reduce.h"
#include "runtime/session.h"
#include "tests/serving_corpus.h"

#ifdef CFGMASK_HAVE_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda_batch.h"
#endif

namespace cfgmask {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// mean, p50, p99, max of a sample, in µs.
nlohmann::json Summary(std::vector<double> v) {
  nlohmann::json j;
  if (v.empty()) return j;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  j["n"] = v.size();
  j["mean_us"] = sum / v.size();
  j["p50_us"] = at(0.5);
  j["p99_us"] = at(0.99);
  j["max_us"] = v.back();
  return j;
}

struct Options {
  std::vector<std::pair<std::string, std::string>> stores;  // name, path
  std::vector<int32_t> batches = {1, 16, 64, 256};
  int32_t steps = 64;
  int32_t warmup = 4;
  std::vector<int32_t> threads = {0};  // CPU threads per run; 0: TBB's default (every core)
  std::string json;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "cuda_batch_bench: %s\nusage: cuda_batch_bench --store NAME=FILE.cfgm [--store ...] "
               "[--batches 1,16,64,256] [--steps N] [--warmup N] [--threads 0,1] [--json OUT]\n",
               why);
  std::exit(2);
}

// "1,16,64" as integers, each at least `min` (else `why` and exit 2).
std::vector<int32_t> IntList(const std::string& v, int32_t min, const char* why) {
  std::vector<int32_t> out;
  for (size_t from = 0; from < v.size();) {
    size_t to = v.find(',', from);
    if (to == std::string::npos) to = v.size();
    out.push_back(std::atoi(v.substr(from, to - from).c_str()));
    if (out.back() < min) Usage(why);
    from = to + 1;
  }
  return out;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--store") {
      const size_t eq = v.find('=');
      if (eq == std::string::npos) Usage("--store takes NAME=FILE");
      o.stores.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--batches") {
      o.batches = IntList(v, 1, "batch sizes must be positive");
    } else if (a == "--steps") {
      o.steps = std::atoi(v.c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(v.c_str());
    } else if (a == "--threads") {
      o.threads = IntList(v, 0, "thread counts must be 0 (every core) or more");
    } else if (a == "--json") {
      o.json = v;
    } else {
      Usage(("unknown option " + a).c_str());
    }
  }
  if (o.stores.empty()) Usage("give at least one --store");
  if (o.steps <= 0) Usage("--steps must be positive");
  return o;
}

#ifdef CFGMASK_HAVE_CUDA
#define CUDA_OK(expr)                                                              \
  do {                                                                             \
    cudaError_t e_ = (expr);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "cuda_batch_bench: %s: %s\n", #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)
#endif

// B sessions walking the forced texts: session b starts at text b % n,
// `b * 7` tokens in, and moves to the next text when one ends.
class Walkers {
 public:
  Walkers(const CompiledStore* store, const std::vector<ForcedText>* texts, int32_t batch)
      : texts_(texts) {
    for (int32_t b = 0; b < batch; ++b) {
      owned_.push_back(std::make_unique<Session>(store));
      text_.push_back(b % static_cast<int32_t>(texts->size()));
      pos_.push_back(0);
      const int32_t skip = (b * 7) % static_cast<int32_t>((*texts)[text_[b]].tokens.size());
      for (int32_t i = 0; i < skip; ++i) Next(b);
      sessions_.push_back(owned_.back().get());
      stores_.push_back(store);
    }
  }
  std::vector<Session*>& sessions() { return sessions_; }
  std::vector<const CompiledStore*>& stores() { return stores_; }
  // Every session takes its next token.
  void Step() {
    for (size_t b = 0; b < owned_.size(); ++b) Next(static_cast<int32_t>(b));
  }

 private:
  void Next(int32_t b) {
    const ForcedText* t = &(*texts_)[text_[b]];
    if (pos_[b] == static_cast<int32_t>(t->tokens.size())) {
      owned_[b]->Reset();
      text_[b] = (text_[b] + 1) % static_cast<int32_t>(texts_->size());
      pos_[b] = 0;
      t = &(*texts_)[text_[b]];
    }
    Status st = owned_[b]->Advance(t->tokens[pos_[b]++]);
    if (!st.ok()) {
      std::fprintf(stderr, "cuda_batch_bench: a forced token was refused: %s\n",
                   st.message().c_str());
      std::exit(1);
    }
  }
  const std::vector<ForcedText>* texts_;
  std::vector<std::unique_ptr<Session>> owned_;
  std::vector<Session*> sessions_;
  std::vector<const CompiledStore*> stores_;
  std::vector<int32_t> text_, pos_;
};

nlohmann::json RunOne(const std::string& name, const CompiledStore& store,
                      const std::vector<ForcedText>& texts, int32_t batch, const Options& o) {
  const int32_t vocab = store.vocab_size, words = store.mask_words();
  Walkers walkers(&store, &texts, batch);      // the CPU path's sessions
  Walkers gpu_walkers(&store, &texts, batch);  // the GPU path's
  BatchMatcher matcher;
  std::vector<int32_t> host_mask(static_cast<size_t>(batch) * words);
  std::vector<float> host_logits(static_cast<size_t>(batch) * vocab, 0.5f);
  std::vector<double> t_parser, t_fill, t_cpu_apply;
  BatchRows rows;
  // The GPU path's CPU twin (OrSessionRowsTwin + FinishBatchRow) against the
  // CPU fill, every step, with or without a GPU: the rows and the filters
  // they carry must give the same masks.
  const std::vector<uint32_t> text_mask = TextTokenMask(store);
  const kernels::StoreView host_view = HostStoreView(store, text_mask.data());
  std::vector<uint32_t> twin(words);
  int64_t twin_mismatches = 0, whole_rows = 0, cleared_rows = 0;
#ifdef CFGMASK_HAVE_CUDA
  std::string why;
  const bool gpu = CudaDeviceAvailable(&why);
  std::unique_ptr<CudaStore> dstore;
  CudaBatchMasker masker;
  int32_t* d_mask = nullptr;
  int32_t* h_pinned = nullptr;
  float* d_f32 = nullptr;
  uint16_t* d_bf16 = nullptr;
  std::vector<int32_t> gpu_mask(host_mask.size());
  std::vector<double> t_h2d, t_gpu_or, t_apply_f32, t_apply_bf16;
  int64_t mismatches = 0;
  if (gpu) {
    Status st = CudaStore::Upload(store, &dstore);
    if (!st.ok()) {
      std::fprintf(stderr, "cuda_batch_bench: %s\n", st.message().c_str());
      std::exit(1);
    }
    CUDA_OK(cudaMalloc(&d_mask, host_mask.size() * 4));
    CUDA_OK(cudaMallocHost(&h_pinned, host_mask.size() * 4));
    CUDA_OK(cudaMalloc(&d_f32, host_logits.size() * 4));
    CUDA_OK(cudaMalloc(&d_bf16, host_logits.size() * 2));
    CUDA_OK(cudaMemset(d_f32, 0, host_logits.size() * 4));
    CUDA_OK(cudaMemset(d_bf16, 0, host_logits.size() * 2));
  }
  std::vector<const CudaStore*> dstores(batch, dstore.get());
#endif
  for (int32_t step = 0; step < o.warmup + o.steps; ++step) {
    const bool timed = step >= o.warmup;
    auto t0 = Clock::now();
    Status st = matcher.FillNextTokenBitmask(walkers.sessions(), walkers.stores(),
                                             host_mask.data(), words);
    auto t1 = Clock::now();
    CollectAcceptedRows(gpu_walkers.sessions(), &rows);
    auto t2 = Clock::now();
    if (!st.ok()) {
      std::fprintf(stderr, "cuda_batch_bench: %s\n", st.message().c_str());
      std::exit(1);
    }
    for (int32_t b = 0; b < batch; ++b) {
      OrSessionRowsTwin(host_view, rows.rows.data() + rows.row_begin[b],
                        rows.row_begin[b + 1] - rows.row_begin[b], rows.eos[b] != 0, twin.data(),
                        words);
      FinishBatchRow(rows, b, words, twin.data(), words);
      if (std::memcmp(twin.data(), host_mask.data() + static_cast<size_t>(b) * words,
                      sizeof(uint32_t) * words) != 0) {
        ++twin_mismatches;
      }
      whole_rows += rows.whole[b] >= 0;
      cleared_rows += rows.clear_begin[b + 1] > rows.clear_begin[b];
    }
    auto t2b = Clock::now();
    st = ApplyTokenBitmaskInplaceCpu(host_logits.data(), LogitsDType::kFloat32, batch, vocab,
                                     host_mask.data(), words);
    auto t3 = Clock::now();
    if (timed) {
      t_fill.push_back(Micros(t0, t1));
      t_parser.push_back(Micros(t1, t2));
      t_cpu_apply.push_back(Micros(t2b, t3));
    }
#ifdef CFGMASK_HAVE_CUDA
    if (gpu) {
      std::memcpy(h_pinned, host_mask.data(), host_mask.size() * 4);
      CUDA_OK(cudaDeviceSynchronize());
      auto g0 = Clock::now();
      CUDA_OK(cudaMemcpy(d_mask, h_pinned, host_mask.size() * 4, cudaMemcpyHostToDevice));
      auto g1 = Clock::now();
      st = ApplyTokenBitmaskInplaceCuda(d_f32, LogitsDType::kFloat32, batch, vocab, d_mask, words);
      CUDA_OK(cudaDeviceSynchronize());
      auto g2 = Clock::now();
      Status st2 =
          ApplyTokenBitmaskInplaceCuda(d_bf16, LogitsDType::kBFloat16, batch, vocab, d_mask, words);
      CUDA_OK(cudaDeviceSynchronize());
      auto g3 = Clock::now();
      CUDA_OK(cudaMemset(d_mask, 0, host_mask.size() * 4));
      CUDA_OK(cudaDeviceSynchronize());
      auto g4 = Clock::now();
      Status st3 = masker.FillFromRows(rows, dstores, d_mask, words);
      CUDA_OK(cudaDeviceSynchronize());
      auto g5 = Clock::now();
      if (!st.ok() || !st2.ok() || !st3.ok()) {
        std::fprintf(stderr, "cuda_batch_bench: %s%s%s\n", st.message().c_str(),
                     st2.message().c_str(), st3.message().c_str());
        std::exit(1);
      }
      CUDA_OK(cudaMemcpy(gpu_mask.data(), d_mask, gpu_mask.size() * 4, cudaMemcpyDeviceToHost));
      if (gpu_mask != host_mask) ++mismatches;
      if (timed) {
        t_h2d.push_back(Micros(g0, g1));
        t_apply_f32.push_back(Micros(g1, g2));
        t_apply_bf16.push_back(Micros(g2, g3));
        t_gpu_or.push_back(Micros(g4, g5));
      }
    }
#endif
    walkers.Step();
    gpu_walkers.Step();
  }
  nlohmann::json r;
  r["store"] = name;
  r["vocab"] = vocab;
  r["batch"] = batch;
  r["parser"] = Summary(t_parser);
  r["cpu_fill"] = Summary(t_fill);
  r["cpu_apply"] = Summary(t_cpu_apply);
  r["twin_mismatched_sessions"] = twin_mismatches;
  r["rows_filled_whole"] = whole_rows;  // session steps whose filter needed the mask
  r["rows_with_clears"] = cleared_rows;
  r["gpu"] = false;
#ifdef CFGMASK_HAVE_CUDA
  if (gpu) {
    r["gpu"] = true;
    r["h2d"] = Summary(t_h2d);
    r["gpu_or"] = Summary(t_gpu_or);
    r["apply_f32"] = Summary(t_apply_f32);
    r["apply_bf16"] = Summary(t_apply_bf16);
    r["gpu_or_mismatched_steps"] = mismatches;
    const double fill = r["cpu_fill"]["mean_us"], h2d = r["h2d"]["mean_us"],
                 apply = r["apply_f32"]["mean_us"];
    r["cpu_fill_share"] = fill / (fill + h2d + apply);
    r["cpu_path_step_us"] = fill + h2d + apply;
    r["gpu_path_step_us"] = r["parser"]["mean_us"].get<double>() +
                            r["gpu_or"]["mean_us"].get<double>() + apply;
    cudaFree(d_mask);
    cudaFreeHost(h_pinned);
    cudaFree(d_f32);
    cudaFree(d_bf16);
  } else {
    r["no_gpu"] = why;
  }
#endif
  return r;
}

int Main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  nlohmann::json out;
  out["cores"] = static_cast<int32_t>(std::thread::hardware_concurrency());
  out["steps"] = o.steps;
#ifdef CFGMASK_HAVE_CUDA
  std::string why;
  if (CudaDeviceAvailable(&why)) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) out["device"] = prop.name;
  } else {
    out["device"] = "none: " + why;
  }
#else
  out["device"] = "none: built without CUDA";
#endif
  int64_t mismatched = 0, twin_mismatched = 0;
  for (const auto& [name, path] : o.stores) {
    CompiledStore store;
    Status st = ReadStoreFile(path, &store);
    if (!st.ok()) {
      std::fprintf(stderr, "cuda_batch_bench: %s\n", st.message().c_str());
      return 2;
    }
    const std::vector<ForcedText> texts = ForceTexts(&store, StdlibTexts(24, 2000, 40000));
    if (texts.empty()) {
      std::fprintf(stderr, "cuda_batch_bench: no standard-library text is accepted by %s "
                   "(is $CFGMASK_PYTHON or $CFGMASK_STDLIB set?)\n", path.c_str());
      return 1;
    }
    for (int32_t threads : o.threads)
    for (int32_t batch : o.batches) {
      std::unique_ptr<tbb::global_control> limit;
      if (threads > 0) {
        limit = std::make_unique<tbb::global_control>(
            tbb::global_control::max_allowed_parallelism, threads);
      }
      nlohmann::json r = RunOne(name, store, texts, batch, o);
      r["texts"] = texts.size();
      r["threads"] = threads > 0 ? threads : out["cores"].get<int32_t>();
      mismatched += r.value("gpu_or_mismatched_steps", int64_t{0});
      twin_mismatched += r["twin_mismatched_sessions"].get<int64_t>();
      std::fprintf(stderr, "%s B=%d V=%d threads=%d: cpu_fill mean %.1f µs p99 %.1f", name.c_str(),
                   batch, store.vocab_size, r["threads"].get<int32_t>(), r["cpu_fill"]["mean_us"].get<double>(),
                   r["cpu_fill"]["p99_us"].get<double>());
      std::fprintf(stderr, " | filter: %lld whole, %lld with clears",
                   static_cast<long long>(r["rows_filled_whole"].get<int64_t>()),
                   static_cast<long long>(r["rows_with_clears"].get<int64_t>()));
      if (r["gpu"].get<bool>()) {
        std::fprintf(stderr, " | h2d %.1f gpu_or %.1f apply_f32 %.1f apply_bf16 %.1f µs | share %.2f",
                     r["h2d"]["mean_us"].get<double>(), r["gpu_or"]["mean_us"].get<double>(),
                     r["apply_f32"]["mean_us"].get<double>(),
                     r["apply_bf16"]["mean_us"].get<double>(), r["cpu_fill_share"].get<double>());
      }
      std::fprintf(stderr, "\n");
      out["runs"].push_back(r);
    }
  }
  out["gpu_or_mismatched_steps"] = mismatched;
  out["twin_mismatched_sessions"] = twin_mismatched;
  const std::string text = out.dump(1);
  if (!o.json.empty()) {
    std::ofstream(o.json) << text << "\n";
  } else {
    std::printf("%s\n", text.c_str());
  }
  if (twin_mismatched > 0) {
    std::fprintf(stderr, "cuda_batch_bench: the GPU path's CPU twin differed from the CPU fill "
                 "for %lld session steps\n", static_cast<long long>(twin_mismatched));
  }
  if (mismatched > 0) {
    std::fprintf(stderr, "cuda_batch_bench: the GPU OR-reduction differed from the CPU fill on "
                 "%lld steps\n", static_cast<long long>(mismatched));
  }
  if (mismatched > 0 || twin_mismatched > 0) return 1;
  return 0;
}

}  // namespace
}  // namespace cfgmask

int main(int argc, char** argv) { return cfgmask::Main(argc, argv); }
