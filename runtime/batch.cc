// The batch API over decoding sessions (see batch.h).  Tested by
// batch_test.cc.
#include "runtime/batch.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cstring>
#include <string>

#include "grammar/base/check.h"
#include "runtime/or_reduce.h"

namespace cfgmask {

void CollectAcceptedRows(std::span<Session* const> sessions, BatchRows* out) {
  const size_t b = sessions.size();
  std::vector<std::vector<int32_t>> per(b), clears(b);
  std::vector<std::vector<uint32_t>> whole(b);
  std::vector<uint8_t> is_whole(b, 0);
  out->eos.assign(b, 0);
  tbb::parallel_for(size_t{0}, b, [&](size_t i) {
    if (!sessions[i]->FilterClears(&clears[i])) {
      // The filter needs the mask: the CPU fills the row.
      whole[i].resize(static_cast<size_t>(sessions[i]->store()->mask_words()));
      sessions[i]->FillMask(whole[i].data());
      is_whole[i] = 1;
      return;
    }
    bool eos = false;
    sessions[i]->AcceptedRows(&per[i], &eos);
    out->eos[i] = eos ? 1 : 0;
  });
  auto flatten = [&](auto& parts, auto* flat, std::vector<int32_t>* begin) {
    begin->assign(b + 1, 0);
    for (size_t i = 0; i < b; ++i) {
      (*begin)[i + 1] = (*begin)[i] + static_cast<int32_t>(parts[i].size());
    }
    flat->resize(static_cast<size_t>((*begin)[b]));
    tbb::parallel_for(size_t{0}, b, [&](size_t i) {
      std::copy(parts[i].begin(), parts[i].end(), flat->begin() + (*begin)[i]);
    });
  };
  flatten(per, &out->rows, &out->row_begin);
  flatten(clears, &out->clears, &out->clear_begin);
  std::vector<int32_t> whole_begin;
  flatten(whole, &out->whole_words, &whole_begin);
  out->whole.assign(b, -1);
  for (size_t i = 0; i < b; ++i) {
    if (is_whole[i]) out->whole[i] = whole_begin[i];
  }
}

void FinishBatchRow(const BatchRows& rows, int32_t b, int32_t mask_words, uint32_t* row,
                    int32_t words_per_row) {
  if (rows.whole[b] >= 0) {
    std::memcpy(row, rows.whole_words.data() + rows.whole[b], sizeof(uint32_t) * mask_words);
    std::memset(row + mask_words, 0, sizeof(uint32_t) * (words_per_row - mask_words));
    return;
  }
  for (int32_t k = rows.clear_begin[b]; k < rows.clear_begin[b + 1]; ++k) {
    const int32_t t = rows.clears[k];
    row[kernels::TokenWord(t)] &= ~kernels::TokenBit(t);
  }
}

int64_t AcceptTokens(Session* session, int64_t k, const std::function<int64_t(int64_t i)>& token,
                     int64_t* taken) {
  *taken = 0;
  for (int64_t i = 0; i < k && !session->IsTerminated(); ++i) {
    const int64_t t = token(i);
    if (t < 0 || t > INT32_MAX || !session->Advance(static_cast<int32_t>(t)).ok()) {
      if (i > 0) CFGMASK_CHECK(session->Rollback(static_cast<int32_t>(i)).ok());
      *taken = 0;
      return i;
    }
    *taken = i + 1;
  }
  return -1;
}

int64_t BatchMatcher::AcceptAndFill(std::span<Session* const> sessions,
                                    std::span<const CompiledStore* const> stores, int64_t k,
                                    const std::function<int64_t(int64_t b, int64_t i)>& token,
                                    std::span<const std::vector<int32_t>> only, uint32_t* bitmask,
                                    int64_t words_per_row, int64_t step_ns[2]) {
  using Clock = std::chrono::steady_clock;
  auto nanos = [](Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  };
  const int64_t b_count = static_cast<int64_t>(sessions.size());
  auto t0 = Clock::now();
  std::vector<int64_t> accepted(b_count, 0);  // ids taken per row, for the undo
  for (int64_t b = 0; b < b_count; ++b) {
    if (sessions[b]->IsTerminated()) continue;
    const int64_t refused =
        AcceptTokens(sessions[b], k, [&](int64_t i) { return token(b, i); }, &accepted[b]);
    if (refused >= 0) {
      for (int64_t u = 0; u < b; ++u) {
        if (accepted[u] > 0) {
          CFGMASK_CHECK(sessions[u]->Rollback(static_cast<int32_t>(accepted[u])).ok());
        }
      }
      return b * k + refused;
    }
  }
  step_ns[0] = nanos(t0);
  t0 = Clock::now();
  auto fill = [&](int64_t b) {
    uint32_t* row = bitmask + b * words_per_row;
    if (sessions[b]->IsTerminated()) {
      std::memset(row, 0xFF, sizeof(uint32_t) * static_cast<size_t>(words_per_row));
      return;
    }
    if (!only.empty() && !only[b].empty()) {
      std::memset(row, 0, sizeof(uint32_t) * static_cast<size_t>(words_per_row));
      for (int32_t t : only[b]) row[t >> 5] |= 1u << (t & 31);
      return;
    }
    const int32_t need = stores[b]->mask_words();
    std::memset(row + need, 0, sizeof(uint32_t) * static_cast<size_t>(words_per_row - need));
    sessions[b]->FillMask(row);
  };
  if (b_count == 1) {  // one row: a thread pool costs more than the row itself
    fill(0);
  } else {
    tbb::parallel_for(int64_t{0}, b_count, fill);
  }
  step_ns[1] = nanos(t0);
  return -1;
}

const std::vector<uint32_t>& BatchMatcher::TextMask(const CompiledStore* store) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = text_masks_[store];
  if (!slot) slot = std::make_unique<std::vector<uint32_t>>(TextTokenMask(*store));
  return *slot;
}

Status BatchMatcher::FillNextTokenBitmask(std::span<Session* const> sessions,
                                          std::span<const CompiledStore* const> stores,
                                          int32_t* bitmask, int32_t words_per_row) {
  if (sessions.size() != stores.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  "FillNextTokenBitmask: " + std::to_string(sessions.size()) + " sessions but " +
                      std::to_string(stores.size()) + " stores");
  }
  std::vector<const uint32_t*> text(sessions.size());
  for (size_t b = 0; b < sessions.size(); ++b) {
    if (sessions[b] == nullptr || stores[b] == nullptr) {
      return Status(ErrorCode::kInvalidArgument,
                    "FillNextTokenBitmask: null session or store at " + std::to_string(b));
    }
    if (stores[b]->mask_words() > words_per_row) {
      return Status(ErrorCode::kInvalidArgument,
                    "FillNextTokenBitmask: words_per_row " + std::to_string(words_per_row) +
                        " < " + std::to_string(stores[b]->mask_words()) + " needed by session " +
                        std::to_string(b));
    }
    text[b] = TextMask(stores[b]).data();
  }
  const OrIsa isa = BestOrIsa();
  tbb::parallel_for(size_t{0}, sessions.size(), [&](size_t b) {
    // Per-task scratch keeps sessions independent; the vector's capacity is
    // small next to the mask itself.
    thread_local std::vector<int32_t> rows;
    bool eos = false;
    sessions[b]->AcceptedRows(&rows, &eos);
    const CompiledStore& s = *stores[b];
    uint32_t* row = reinterpret_cast<uint32_t*>(bitmask) + b * static_cast<size_t>(words_per_row);
    std::memset(row, 0, sizeof(uint32_t) * static_cast<size_t>(words_per_row));
    OrRowsSimd(s, text[b], rows.data(), rows.size(), row, isa);
    if (eos) {
      for (int32_t e : s.eos_ids) row[kernels::TokenWord(e)] |= kernels::TokenBit(e);
    }
    sessions[b]->FilterMask(row);
  });
  return Status::Ok();
}

Status BatchMatcher::AdvanceBatch(std::span<Session* const> sessions,
                                  std::span<const int32_t> tokens) {
  if (sessions.size() != tokens.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  "AdvanceBatch: " + std::to_string(sessions.size()) + " sessions but " +
                      std::to_string(tokens.size()) + " tokens");
  }
  std::vector<Status> results(sessions.size());
  tbb::parallel_for(size_t{0}, sessions.size(),
                    [&](size_t b) { results[b] = sessions[b]->Advance(tokens[b]); });
  for (size_t b = 0; b < results.size(); ++b) {
    if (!results[b].ok()) {
      // All or nothing: the sessions that moved step back (each Advance
      // pushed exactly one history entry), so the batch is as before.
      for (size_t r = 0; r < results.size(); ++r) {
        if (results[r].ok()) CFGMASK_CHECK(sessions[r]->Rollback(1).ok());
      }
      return Status(results[b].code(), "session " + std::to_string(b) + ": " + results[b].message());
    }
  }
  return Status::Ok();
}

namespace {

// Bit j of a bitmask word, as a table so that the select below vectorises
// (a broadcast AND and compare) without per-lane shifts.
constexpr uint32_t kTokenBit[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
    1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};

// One row, a 32-token word at a time: words that allow everything are
// skipped, words that allow nothing are filled, the rest select each logit
// or -inf without a branch (the inner loop vectorises).  Tokens past the
// bitmask's width are refused (kernels::MaskAllows).
template <typename Bits>
void MaskRow(Bits* row, int32_t vocab, const int32_t* mask, int32_t words_per_row, Bits neg_inf) {
  const int32_t full = std::min(vocab / 32, words_per_row);
  for (int32_t w = 0; w < full; ++w) {
    const uint32_t m = static_cast<uint32_t>(mask[w]);
    if (m == 0xFFFFFFFFu) continue;
    Bits* p = row + static_cast<size_t>(w) * 32;
    if (m == 0) {
      for (int j = 0; j < 32; ++j) p[j] = neg_inf;
      continue;
    }
    for (int j = 0; j < 32; ++j) {
      const Bits keep = (m & kTokenBit[j]) != 0 ? static_cast<Bits>(~Bits{0}) : Bits{0};
      p[j] = static_cast<Bits>((p[j] & keep) | (neg_inf & static_cast<Bits>(~keep)));
    }
  }
  for (int32_t t = full * 32; t < vocab; ++t) {
    row[t] = kernels::ApplyMaskToLogit(row[t], kernels::MaskAllows(mask, words_per_row, t), neg_inf);
  }
}

template <typename Bits>
void MaskRows(Bits* logits, int32_t batch, int32_t vocab, const int32_t* bitmask,
              int32_t words_per_row, Bits neg_inf) {
  auto one = [&](int32_t b) {
    MaskRow(logits + static_cast<size_t>(b) * vocab, vocab,
            bitmask + static_cast<size_t>(b) * words_per_row, words_per_row, neg_inf);
  };
  if (batch <= 1) {  // one row: a thread pool costs more than the row itself
    if (batch == 1) one(0);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, batch), [&](const tbb::blocked_range<int32_t>& r) {
    for (int32_t b = r.begin(); b < r.end(); ++b) one(b);
  });
}

// One row whose elements lie `stride` elements apart (stride > 1): only the
// refused logits are written, found bit by bit with count-trailing-zeros.
// A test of each bit (the first version) mispredicted a branch per token on
// a mask that allows about half the tokens: 0.97 ms at 262,144 tokens
// against 34 µs for the contiguous row (tests/bench/mask_apply_bench.cc).
template <typename Bits>
void MaskRowStrided(Bits* row, int64_t stride, int32_t vocab, const int32_t* mask,
                    int32_t words_per_row, Bits neg_inf) {
  const int32_t full = std::min(vocab / 32, words_per_row);
  for (int32_t w = 0; w < full; ++w) {
    Bits* p = row + static_cast<int64_t>(w) * 32 * stride;
    const uint32_t m = static_cast<uint32_t>(mask[w]);
    if (m == 0) {  // the whole word refused: 32 independent stores
      for (int j = 0; j < 32; ++j) p[j * stride] = neg_inf;
      continue;
    }
    for (uint32_t refused = ~m; refused != 0; refused &= refused - 1) {
      p[static_cast<int64_t>(std::countr_zero(refused)) * stride] = neg_inf;
    }
  }
  for (int32_t t = full * 32; t < vocab; ++t) {
    if (!kernels::MaskAllows(mask, words_per_row, t)) row[t * stride] = neg_inf;
  }
}

}  // namespace

Status ApplyTokenBitmaskStridedCpu(void* logits, LogitsDType dtype, int32_t vocab, int64_t stride,
                                   const int32_t* bitmask, int32_t words_per_row) {
  if (vocab < 0 || words_per_row < 0 || stride < 1 || (vocab > 0 && (!logits || !bitmask))) {
    return Status(ErrorCode::kInvalidArgument, "ApplyTokenBitmaskStridedCpu: bad shape or buffer");
  }
  switch (dtype) {
    case LogitsDType::kFloat32:
      if (stride == 1) {
        MaskRow(static_cast<uint32_t*>(logits), vocab, bitmask, words_per_row,
                kernels::kNegInfFloat32Bits);
      } else {
        MaskRowStrided(static_cast<uint32_t*>(logits), stride, vocab, bitmask, words_per_row,
                       kernels::kNegInfFloat32Bits);
      }
      break;
    case LogitsDType::kFloat16:
    case LogitsDType::kBFloat16: {
      const uint16_t neg_inf = dtype == LogitsDType::kFloat16 ? kernels::kNegInfFloat16Bits
                                                              : kernels::kNegInfBFloat16Bits;
      if (stride == 1) {
        MaskRow(static_cast<uint16_t*>(logits), vocab, bitmask, words_per_row, neg_inf);
      } else {
        MaskRowStrided(static_cast<uint16_t*>(logits), stride, vocab, bitmask, words_per_row,
                       neg_inf);
      }
      break;
    }
    default:
      return Status(ErrorCode::kInvalidArgument, "ApplyTokenBitmaskStridedCpu: unknown dtype");
  }
  return Status::Ok();
}

Status ApplyTokenBitmaskInplaceCpu(void* logits, LogitsDType dtype, int32_t batch, int32_t vocab,
                                   const int32_t* bitmask, int32_t words_per_row) {
  if (batch < 0 || vocab < 0 || words_per_row < 0 || (batch > 0 && (!logits || !bitmask))) {
    return Status(ErrorCode::kInvalidArgument, "ApplyTokenBitmaskInplaceCpu: bad shape or buffer");
  }
  switch (dtype) {
    case LogitsDType::kFloat32:
      MaskRows(static_cast<uint32_t*>(logits), batch, vocab, bitmask, words_per_row,
               kernels::kNegInfFloat32Bits);
      break;
    case LogitsDType::kFloat16:
      MaskRows(static_cast<uint16_t*>(logits), batch, vocab, bitmask, words_per_row,
               kernels::kNegInfFloat16Bits);
      break;
    case LogitsDType::kBFloat16:
      MaskRows(static_cast<uint16_t*>(logits), batch, vocab, bitmask, words_per_row,
               kernels::kNegInfBFloat16Bits);
      break;
    default:
      return Status(ErrorCode::kInvalidArgument, "ApplyTokenBitmaskInplaceCpu: unknown dtype");
  }
  return Status::Ok();
}

}  // namespace cfgmask
