// Fuzz target: the runtime driven by arbitrary operation sequences on a
// compiled store (python.lark and a small tokenizer, see fuzz_store.h).
//
// Input: 3-byte records (op, 16-bit value).  Ops: Advance with any id
// (negative, out of range, special and EOS ids included), Advance with the
// value-th token of the current mask (to get deep into valid programs),
// Rollback with any count, AdvanceBytes, Fork and JumpForwardString.
// Invariants checked at every step:
//  - Advance(t) succeeds exactly when bit t of the mask is set (tokens with
//    empty bytes aside; a kResourceLimit refusal is the per-step bound);
//  - a failed Advance/Rollback leaves the session unchanged;
//  - after Rollback(k) the text and the mask are those of k steps before
//    (a row-memo hit, checked against the mask computed the first time).
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "tests/fuzz/fuzz_store.h"

namespace {

bool Bit(const std::vector<uint32_t>& mask, int32_t t) { return (mask[t >> 5] >> (t & 31)) & 1u; }

}  // namespace

// Loads (or compiles) the store before the first input, so that its time
// does not count against the per-input limit.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  cfgmask::FuzzStore();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  const CompiledStore& store = FuzzStore();
  if (size > 3 * 200) return 0;
  const int32_t V = store.vocab_size;
  SessionLimits limits;
  limits.max_live_states = 16;
  // A small row memo: emptied often, so both its hits (a rollback's mask
  // again) and its evictions are driven; Advance, which never reads it,
  // checks every memoised mask bit it is asked about.
  limits.memo_bytes = 1 << 16;
  Session s(&store, limits);
  std::vector<std::vector<uint32_t>> masks = {s.Mask()};  // per history point
  std::vector<std::string> texts = {""};
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const uint8_t op = data[i] % 8;
    const uint16_t value = static_cast<uint16_t>(data[i + 1] | (data[i + 2] << 8));
    const std::vector<uint32_t>& mask = masks.back();
    CFGMASK_FUZZ_CHECK(s.HistoryLength() + 1 == static_cast<int32_t>(masks.size()));
    CFGMASK_FUZZ_CHECK(s.text() == texts.back());
    int32_t token = -1;
    if (op <= 2) {
      token = static_cast<int32_t>(value % (V + 8)) - 4;
    } else if (op <= 4) {
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < V; ++t) {
        if (Bit(mask, t)) allowed.push_back(t);
      }
      if (allowed.empty()) continue;
      token = allowed[value % allowed.size()];
    } else if (op == 5) {
      const int32_t k = static_cast<int32_t>(value % 12) - 2;
      const Status st = s.Rollback(k);
      CFGMASK_FUZZ_CHECK(st.ok() == (k >= 0 && k < static_cast<int32_t>(masks.size())));
      if (st.ok()) {
        masks.resize(masks.size() - k);
        texts.resize(texts.size() - k);
        CFGMASK_FUZZ_CHECK(s.text() == texts.back());
        CFGMASK_FUZZ_CHECK(s.Mask() == masks.back());
      }
      continue;
    } else if (op == 6) {
      // A few bytes of a token: text not aligned to the vocabulary.
      const std::string_view b = store.TokenBytes(value % V);
      const std::string before = s.text();
      const Status st = s.AdvanceBytes(b.substr(0, 1 + value % 3));
      if (st.ok()) {
        masks.push_back(s.Mask());
        texts.push_back(s.text());
      } else {
        CFGMASK_FUZZ_CHECK(s.text() == before);
      }
      continue;
    } else {
      Session f = s.Fork();
      const std::string forced = f.JumpForwardString(32);
      CFGMASK_FUZZ_CHECK(forced.size() <= 32);
      CFGMASK_FUZZ_CHECK(f.Mask() == mask);
      continue;
    }
    const Status st = s.Advance(token);
    if (token < 0 || token >= V) {
      CFGMASK_FUZZ_CHECK(!st.ok() && st.code() == ErrorCode::kInvalidToken);
      continue;
    }
    if (st.code() == ErrorCode::kResourceLimit) continue;
    const bool empty = store.TokenBytes(token).empty() && !store.token_special[token];
    if (!empty && st.ok() != Bit(mask, token)) {
      std::fprintf(stderr, "token %d: Advance %s, mask bit %d, after %zu bytes\n", token,
                   st.ToString().c_str(), Bit(mask, token), texts.back().size());
      std::abort();
    }
    if (st.ok()) {
      masks.push_back(s.Mask());
      texts.push_back(s.text());
    } else {
      CFGMASK_FUZZ_CHECK(s.text() == texts.back());
    }
  }
  return 0;
}
