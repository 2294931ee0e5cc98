// Fuzz target: the Python API's call sequences on one shared matcher from
// two threads, through what the binding uses (runtime/shared_session.h: a
// SharedSession, each call under a Hold, the busy case an error).
//
// The input decodes into two sequences of calls, one per thread: accept a
// token (any id, or the n-th token of the current mask), accept bytes, fill
// the mask, rollback, reset, fork (and step the fork), set_suffix,
// is_terminated, can_end, completion search, jump-forward, and the
// SharedSession calls themselves.  Both threads start together on one
// session.  Checked:
//  - every call succeeds, is refused (kInvalidToken), or finds the session
//    busy (kBusy, "in use by another thread"); nothing else but the errors
//    its arguments decide (a rollback past the history) or a limit of the
//    session (kResourceLimit), which the replay must meet too;
//  - no refusal comes from contention: the calls that held the session ran
//    one at a time, in the order of a counter taken under the hold, and a
//    fresh session replaying them in that order alone gives the same result
//    for every one (status, mask, text, history, answers);
//  - each thread's sequence alone on a fresh session never meets kBusy, and
//    when the other thread changed nothing it gives exactly the results that
//    thread saw;
//  - no crash, no sanitizer report.
//
// Input: 3-byte records (op, 16-bit value); bit 7 of op picks the thread.
// At most 64 records.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/completion.h"
#include "runtime/session.h"
#include "runtime/shared_session.h"
#include "tests/fuzz/fuzz_store.h"

namespace {

using cfgmask::CompiledStore;
using cfgmask::ErrorCode;
using cfgmask::Session;
using cfgmask::SessionLimits;
using cfgmask::SharedSession;
using cfgmask::Status;

constexpr int kOps = 15;

// Calls made and calls that found the session busy, over the run (printed
// at exit: the share of contention the run reached).
std::atomic<int64_t> g_calls{0}, g_busy{0};

struct Call {
  uint8_t op;
  uint16_t value;
};

// What a call did: its status and what it answered (a hash of masks and
// strings), and where it left the session.
struct Outcome {
  bool busy = false;
  bool ordered = false;  // ran under a Hold of its own (in the replayed order)
  bool mutating = false;
  int64_t order = -1;
  ErrorCode code = ErrorCode::kOk;
  uint64_t answer = 0;
  std::string text;
  int32_t history = -1;
  bool operator==(const Outcome& o) const {
    return busy == o.busy && code == o.code && answer == o.answer && text == o.text &&
           history == o.history;
  }
};

SessionLimits Limits() {
  SessionLimits limits;
  limits.max_live_states = 16;
  limits.memo_bytes = 1 << 16;
  return limits;
}

uint64_t Mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull; }
uint64_t HashBytes(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = Mix(h, c);
  return Mix(h, s.size());
}

cfgmask::Completer& SharedCompleter(std::unique_lock<std::mutex>* lock) {
  static std::mutex mu;
  static cfgmask::Completer* completer = new cfgmask::Completer(cfgmask::FuzzStore());
  *lock = std::unique_lock<std::mutex>(mu);
  return *completer;
}

// What a call that held the session may answer: success, a refusal, or an
// error its arguments or a limit decide (a rollback past the history is
// kInvalidArgument, a session over max_live_states kResourceLimit), which
// the replay must meet too.  Never kBusy there, never a damaged store.
bool AllowedOk(ErrorCode c) {
  return c == ErrorCode::kOk || c == ErrorCode::kInvalidToken ||
         c == ErrorCode::kInvalidArgument || c == ErrorCode::kResourceLimit;
}

// Runs `c` on `s` (held by the caller): the result and whether it changed
// the session.  Deterministic in the session's state and the call.
Outcome RunHeld(const CompiledStore& store, Session& s, const Call& c) {
  const int32_t V = store.vocab_size;
  Outcome o;
  Status st;
  switch (c.op % kOps) {
    case 0: {  // accept_token(any id)
      const int32_t t = static_cast<int32_t>(c.value % (V + 8)) - 4;
      st = s.Advance(t);
      o.mutating = true;
      break;
    }
    case 1:
    case 2: {  // accept_token(the n-th token the mask allows)
      const std::vector<uint32_t> mask = s.Mask();
      st = s.store_status();
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < V; ++t) {
        if (cfgmask::MaskAllows(mask, t)) allowed.push_back(t);
      }
      o.answer = allowed.size();
      if (st.ok() && !allowed.empty()) st = s.Advance(allowed[c.value % allowed.size()]);
      o.mutating = true;
      break;
    }
    case 3: {  // accept_bytes: a piece of a token, not aligned to tokens
      const std::string piece(store.TokenBytes(c.value % V).substr(0, 1 + c.value % 3));
      st = s.AdvanceBytes(piece);
      o.mutating = true;
      break;
    }
    case 4: {  // fill_mask
      const std::vector<uint32_t> mask = s.Mask();
      st = s.store_status();
      for (uint32_t w : mask) o.answer = Mix(o.answer, w);
      break;
    }
    case 5:  // rollback, counts out of range included
      st = s.Rollback(static_cast<int32_t>(c.value % 6) - 1);
      o.mutating = true;
      break;
    case 6:  // reset
      if (c.value % 3 == 0) {
        s.Reset();
        o.mutating = true;
      }
      break;
    case 7: {  // fork, then the fork goes its own way
      Session f = s.Fork();
      o.answer = HashBytes(f.HistoryLength(), f.text());
      const std::vector<uint32_t> mask = f.Mask();
      for (int32_t t = 0; t < V; ++t) {
        if (cfgmask::MaskAllows(mask, t) && (c.value & 1)) {
          o.answer = Mix(o.answer, f.Advance(t).ok());
          break;
        }
      }
      break;
    }
    case 8: {  // set_suffix
      std::string suffix;
      if (c.value % 4 != 0) suffix = std::string(store.TokenBytes(c.value % V));
      s.SetSuffix(suffix);
      o.mutating = true;
      break;
    }
    case 9:  // is_terminated
      o.answer = s.IsTerminated();
      break;
    case 10:  // can_end
      o.answer = s.CanEnd();
      break;
    case 11: {  // completion_search with a small budget
      std::unique_lock<std::mutex> lock;
      cfgmask::Completer& completer = SharedCompleter(&lock);
      std::string completion;
      int64_t used = 0;
      const cfgmask::CompletionResult r = completer.Search(&s, 1 + c.value % 64, &completion, &used);
      o.answer = HashBytes(Mix(static_cast<uint64_t>(r), used), completion);
      break;
    }
    case 12:  // jump_forward_string
      o.answer = HashBytes(0, s.JumpForwardString(c.value % 48));
      break;
    default:
      break;
  }
  o.code = st.code();
  o.text = s.text();
  o.history = s.HistoryLength();
  return o;
}

// Ops 13 and 14: the SharedSession calls themselves, which hold the session
// on their own (so their place in the order is unknown): read-only ones, and
// a fork through SharedSession::Fork stepped on its own.  Only their status
// is checked.
Outcome RunUnordered(const CompiledStore& store, SharedSession& shared, const Call& c) {
  Outcome o;
  Status st;
  bool b = false;
  std::string text;
  int32_t n = 0;
  if (c.op % kOps == 13) {
    switch (c.value % 5) {
      case 0: st = shared.CanEnd(&b); break;
      case 1: st = shared.IsTerminated(&b); break;
      case 2: st = shared.HistoryLength(&n); break;
      case 3: st = shared.Text(&text); break;
      default: st = shared.JumpForwardString(c.value % 32, &text); break;
    }
  } else {
    std::unique_ptr<SharedSession> fork;
    st = shared.Fork(&fork);
    if (st.ok()) {
      std::vector<uint32_t> mask(store.mask_words());
      CFGMASK_FUZZ_CHECK(fork != nullptr);
      CFGMASK_FUZZ_CHECK(fork->FillMask(mask.data()).ok());
      for (int32_t t = 0; t < store.vocab_size; ++t) {
        if (cfgmask::MaskAllows(mask, t)) {
          const Status a = fork->Advance(t);
          CFGMASK_FUZZ_CHECK(a.ok() || a.code() == ErrorCode::kResourceLimit);
          break;
        }
      }
    } else {
      CFGMASK_FUZZ_CHECK(fork == nullptr);
    }
  }
  o.busy = st.code() == ErrorCode::kBusy;
  o.code = st.code();
  CFGMASK_FUZZ_CHECK(st.ok() || o.busy);
  return o;
}

void CheckBusy(const Status& st) {
  CFGMASK_FUZZ_CHECK(st.code() == ErrorCode::kBusy);
  CFGMASK_FUZZ_CHECK(st.message().find("in use by another thread") != std::string::npos);
}

// One thread's calls on `shared`; `order` numbers the calls that held it.
void RunThread(const CompiledStore& store, SharedSession& shared, const std::vector<Call>& calls,
               std::atomic<int>* ready, int64_t* order, std::vector<Outcome>* out) {
  ready->fetch_add(1);
  while (ready->load() < 2) {
  }
  for (const Call& c : calls) {
    ++g_calls;
    if (c.op % kOps >= 13) {
      out->push_back(RunUnordered(store, shared, c));
      g_busy += out->back().busy;
      continue;
    }
    SharedSession::Hold h = shared.Take();
    if (!h.ok()) {
      ++g_busy;
      CheckBusy(h.status());
      Outcome o;
      o.busy = true;
      o.code = ErrorCode::kBusy;
      out->push_back(o);
      continue;
    }
    Outcome o = RunHeld(store, h.session(), c);
    o.ordered = true;
    o.order = (*order)++;  // only the holder writes it
    CFGMASK_FUZZ_CHECK(AllowedOk(o.code));
    out->push_back(std::move(o));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  std::atexit([] {
    std::fprintf(stderr, "shared_matcher_fuzz: %lld calls on a shared session, %lld found it busy\n",
                 static_cast<long long>(g_calls.load()), static_cast<long long>(g_busy.load()));
  });
  cfgmask::FuzzStore();
  std::unique_lock<std::mutex> lock;
  SharedCompleter(&lock);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const CompiledStore& store = cfgmask::FuzzStore();
  if (size > 3 * 64) return 0;
  std::vector<Call> calls[2];
  for (size_t i = 0; i + 3 <= size; i += 3) {
    calls[data[i] >> 7].push_back({static_cast<uint8_t>(data[i] & 0x7f),
                                   static_cast<uint16_t>(data[i + 1] | (data[i + 2] << 8))});
  }
  // Both threads on one shared session.
  SharedSession shared(&store, Limits());
  std::atomic<int> ready{0};
  int64_t order = 0;
  std::vector<Outcome> seen[2];
  std::thread a(RunThread, std::cref(store), std::ref(shared), std::cref(calls[0]), &ready,
                &order, &seen[0]);
  std::thread b(RunThread, std::cref(store), std::ref(shared), std::cref(calls[1]), &ready,
                &order, &seen[1]);
  a.join();
  b.join();
  CFGMASK_FUZZ_CHECK(shared.Take().ok());  // released after every call

  // The calls that held the session, replayed alone in their order.
  std::vector<std::pair<const Call*, const Outcome*>> linear(order, {nullptr, nullptr});
  bool changed[2] = {false, false};
  for (int t = 0; t < 2; ++t) {
    CFGMASK_FUZZ_CHECK(seen[t].size() == calls[t].size());
    for (size_t i = 0; i < calls[t].size(); ++i) {
      const Outcome& o = seen[t][i];
      if (!o.ordered) continue;
      CFGMASK_FUZZ_CHECK(o.order >= 0 && o.order < order && linear[o.order].first == nullptr);
      linear[o.order] = {&calls[t][i], &o};
      if (o.mutating && o.code == ErrorCode::kOk) changed[t] = true;
    }
  }
  {
    Session replay(&store, Limits());
    for (const auto& [call, outcome] : linear) {
      CFGMASK_FUZZ_CHECK(call != nullptr);
      Outcome r = RunHeld(store, replay, *call);
      if (!(r == *outcome)) {
        std::fprintf(stderr, "op %d value %d: status %d / %d, answer %llu / %llu, history %d / %d\n",
                     call->op % kOps, call->value, static_cast<int>(outcome->code),
                     static_cast<int>(r.code), static_cast<unsigned long long>(outcome->answer),
                     static_cast<unsigned long long>(r.answer), outcome->history, r.history);
        std::abort();
      }
    }
  }
  // Each thread's sequence alone: never busy; the same results as under
  // contention when the other thread changed nothing (its calls busy or
  // read-only), busy calls left out.
  for (int t = 0; t < 2; ++t) {
    SharedSession alone(&store, Limits());
    for (size_t i = 0; i < calls[t].size(); ++i) {
      const Call& c = calls[t][i];
      if (c.op % kOps >= 13) {
        CFGMASK_FUZZ_CHECK(!RunUnordered(store, alone, c).busy);
        continue;
      }
      if (seen[t][i].busy && changed[1 - t] == false) continue;  // never ran there
      SharedSession::Hold h = alone.Take();
      CFGMASK_FUZZ_CHECK(h.ok());
      const Outcome r = RunHeld(store, h.session(), c);
      CFGMASK_FUZZ_CHECK(AllowedOk(r.code));
      if (!changed[1 - t] && !seen[t][i].busy) CFGMASK_FUZZ_CHECK(r == seen[t][i]);
    }
  }
  return 0;
}
