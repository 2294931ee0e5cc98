// Fuzz target: a matcher driven by arbitrary call sequences (advance by a
// mask token or any id, advance by bytes, rollback, fork, reset, fill), each
// mask compared with a slow reference: a fresh session that replays, from
// the start, every step the fuzzed session has kept.  That catches state a
// fork, a reset or a rollback carries over wrongly, which the per-step check
// of session_fuzz (Advance against the current mask) cannot see.
//
// Input: 3-byte records (op, 16-bit value), at most 48 of them (each fill
// replays the history: quadratic).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "tests/fuzz/fuzz_store.h"

namespace {

using cfgmask::CompiledStore;
using cfgmask::Session;
using cfgmask::SessionLimits;

struct Step {
  int32_t token;      // >= 0: Advance(token)
  std::string bytes;  // else AdvanceBytes(bytes)
};

SessionLimits Limits() {
  SessionLimits limits;
  limits.max_live_states = 16;
  limits.memo_bytes = 1 << 16;
  return limits;
}

// The reference: every kept step again, from a new session.
std::unique_ptr<Session> Replay(const CompiledStore& store, const std::vector<Step>& steps) {
  auto r = std::make_unique<Session>(&store, Limits());
  for (const Step& st : steps) {
    const cfgmask::Status s = st.token >= 0 ? r->Advance(st.token) : r->AdvanceBytes(st.bytes);
    CFGMASK_FUZZ_CHECK(s.ok());
  }
  return r;
}

bool Bit(const std::vector<uint32_t>& mask, int32_t t) { return (mask[t >> 5] >> (t & 31)) & 1u; }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  cfgmask::FuzzStore();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  const CompiledStore& store = FuzzStore();
  if (size > 3 * 48) return 0;
  const int32_t V = store.vocab_size;
  auto s = std::make_unique<Session>(&store, Limits());
  std::vector<Step> steps;  // what `s` has accepted and kept, in order
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const uint8_t op = data[i] % 8;
    const uint16_t value = static_cast<uint16_t>(data[i + 1] | (data[i + 2] << 8));
    CFGMASK_FUZZ_CHECK(s->HistoryLength() == static_cast<int32_t>(steps.size()));
    if (op <= 1) {  // a token the mask allows
      const std::vector<uint32_t> mask = s->Mask();
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < V; ++t) {
        if (Bit(mask, t)) allowed.push_back(t);
      }
      if (allowed.empty()) continue;
      const int32_t t = allowed[value % allowed.size()];
      const Status st = s->Advance(t);
      if (st.code() == ErrorCode::kResourceLimit) continue;
      CFGMASK_FUZZ_CHECK(st.ok());
      if (!s->IsTerminated()) steps.push_back({t, ""});
      else return 0;  // EOS ends the sequence: nothing more to compare
    } else if (op == 2) {  // any id, in range or not
      const int32_t t = static_cast<int32_t>(value % (V + 8)) - 4;
      const std::string before = s->text();
      const Status st = s->Advance(t);
      if (st.ok()) {
        if (s->IsTerminated()) return 0;
        steps.push_back({t, ""});
      } else {
        CFGMASK_FUZZ_CHECK(s->text() == before);
      }
    } else if (op == 3) {  // bytes not aligned to tokens
      const std::string_view b = store.TokenBytes(value % V);
      const std::string piece(b.substr(0, 1 + value % 3));
      const std::string before = s->text();
      const Status st = s->AdvanceBytes(piece);
      if (st.ok()) {
        steps.push_back({-1, piece});
      } else {
        CFGMASK_FUZZ_CHECK(s->text() == before);
      }
    } else if (op == 4) {  // rollback, counts out of range included
      const int32_t k = static_cast<int32_t>(value % 10) - 2;
      const Status st = s->Rollback(k);
      CFGMASK_FUZZ_CHECK(st.ok() == (k >= 0 && k <= static_cast<int32_t>(steps.size())));
      if (st.ok()) steps.resize(steps.size() - k);
    } else if (op == 5) {  // continue on a fork; the original goes away
      auto f = std::make_unique<Session>(s->Fork());
      s = std::move(f);
    } else if (op == 6) {
      if (value % 4 == 0) {
        s->Reset();
        steps.clear();
      }
    } else {  // fill, against the reference
      const std::unique_ptr<Session> r = Replay(store, steps);
      CFGMASK_FUZZ_CHECK(s->text() == r->text());
      if (s->Mask() != r->Mask()) {
        std::fprintf(stderr, "mask differs from the replay after %zu steps, text %zu bytes\n",
                     steps.size(), r->text().size());
        std::abort();
      }
      CFGMASK_FUZZ_CHECK(s->CanEnd() == r->CanEnd());
    }
  }
  return 0;
}
