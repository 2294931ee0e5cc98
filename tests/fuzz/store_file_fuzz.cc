// Fuzz target: the store-file loader, and the runtime on whatever it accepts.
//
// Input: byte 0 chooses the mode.  Even: the rest is a whole file.  Odd: the
// rest is a payload, and the target writes the header that makes it pass the
// size, version, identity and checksum tests (StoreFileHeaderFor), so that
// the structural validation is what is fuzzed:
// whatever ReadStoreFile accepts must be safe to run, so a Session is then
// driven over it (masks, a few Advance calls, EOS, JumpForwardString).
// Seeds: make_seeds.py (payloads of small compiled stores).
#include <cstdint>
#include <cstring>
#include <string>

#include "maskstore/compiled_store.h"
#include "runtime/session.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  if (size < 1 || size > (1 << 20)) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) file = StoreFileHeaderFor(file) + file;
  const std::string& path = FuzzScratchPath(".cfgm");
  FuzzWriteFile(path, reinterpret_cast<const uint8_t*>(file.data()), file.size());
  CompiledStore store;
  const Status st = ReadStoreFile(path, &store);
  if (!st.ok()) {
    CFGMASK_FUZZ_CHECK(st.code() == ErrorCode::kStoreFile || st.code() == ErrorCode::kIo);
    return 0;
  }
  if (store.vocab_size > (1 << 16)) return 0;  // keep one input fast
  SessionLimits limits;
  limits.max_live_states = 16;
  Session s(&store, limits);
  uint32_t seed = data[0];
  for (int step = 0; step < 4; ++step) {
    std::vector<uint32_t> mask = s.Mask();
    s.CanEnd();
    int32_t pick = -1;
    for (int32_t t = 0; t < store.vocab_size; ++t) {
      if ((mask[t >> 5] >> (t & 31)) & 1u) {
        pick = t;
        if (seed-- == 0) break;
      }
    }
    if (pick < 0) break;
    s.Advance(pick);
    s.Advance(static_cast<int32_t>(seed % store.vocab_size));
  }
  s.JumpForwardString(16);
  s.Rollback(s.HistoryLength());
  return 0;
}
