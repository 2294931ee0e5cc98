// Fuzz target: the store-file loader, and the runtime on whatever it accepts.
//
// Input: byte 0 chooses the mode (its value mod 4).  0: the rest is a whole
// file.  1 and 3: the rest is a payload, and the target writes the header
// that makes it pass the size, version, identity and checksum tests
// (StoreFileHeaderFor), so that the structural validation is what is fuzzed:
// whatever ReadStoreFile accepts must be safe to run, so a Session is then
// driven over it (masks, a few Advance calls, EOS, JumpForwardString).
// 2: the rows part of a good store file (CFGMASK_FUZZ_ROWS_STORE, run_fuzz.sh
// names json-small.cfgm) damaged by up to 8 edits (5-byte records: offset
// into the rows part, xor byte), its header and index left valid: the
// per-root row checksums must catch the damage before a mask of that root
// is served.  A session on the damaged file and one on the good file walk
// the same tokens; every mask of the damaged one equals the good one's, or
// its store_status is an error first (and then Advance fails too).
// Seeds: make_seeds.py (payloads of small compiled stores).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/session.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr size_t kHeaderBytes = 56;    // store_file.cc's header
constexpr size_t kIndexBytesAt = 40;   // its size of the index part

// Mode 2: the good file, its store and where its rows part begins.
struct RowsBase {
  std::string file;
  cfgmask::CompiledStore store;
  size_t rows_start = 0;
  bool ok = false;
};

const RowsBase& Base() {
  static const RowsBase* base = [] {
    auto* b = new RowsBase;
    const std::string path = cfgmask::FuzzEnv("CFGMASK_FUZZ_ROWS_STORE");
    FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "rb");
    if (f == nullptr) return b;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) b->file.append(buf, n);
    std::fclose(f);
    if (b->file.size() <= kHeaderBytes || !cfgmask::ReadStoreFile(path, &b->store).ok()) return b;
    uint64_t index_bytes;
    std::memcpy(&index_bytes, b->file.data() + kIndexBytesAt, 8);
    b->rows_start = kHeaderBytes + index_bytes;
    b->ok = b->rows_start < b->file.size();
    return b;
  }();
  return *base;
}

void DamagedRows(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  const RowsBase& base = Base();
  if (!base.ok) return;
  std::string file = base.file;
  const size_t rows = file.size() - base.rows_start;
  size_t i = 0;
  for (int edit = 0; edit < 8 && i + 5 <= size; ++edit, i += 5) {
    uint32_t at;
    std::memcpy(&at, data + i, 4);
    file[base.rows_start + at % rows] ^= static_cast<char>(data[i + 4] ? data[i + 4] : 1);
  }
  const std::string& path = FuzzScratchPath(".cfgm");
  FuzzWriteFile(path, reinterpret_cast<const uint8_t*>(file.data()), file.size());
  CompiledStore store;
  if (!ReadStoreFile(path, &store).ok()) return;
  SessionLimits limits;
  limits.max_live_states = 16;
  Session good(&base.store, limits), bad(&store, limits);
  uint32_t seed = i < size ? data[i] : 0;
  for (int step = 0; step < 8; ++step) {
    const std::vector<uint32_t> want = good.Mask();
    const std::vector<uint32_t> got = bad.Mask();
    if (!bad.store_status().ok()) {
      CFGMASK_FUZZ_CHECK(bad.store_status().code() == ErrorCode::kStoreFile);
      return;  // caught before the mask was served
    }
    if (got != want) {
      std::fprintf(stderr, "a damaged row served a different mask at step %d\n", step);
      std::abort();
    }
    CFGMASK_FUZZ_CHECK(bad.CanEnd() == good.CanEnd());
    int32_t pick = -1;
    for (int32_t t = 0; t < base.store.vocab_size; ++t) {
      if (MaskAllows(want, t)) {
        pick = t;
        if (seed-- == 0) break;
      }
    }
    if (pick < 0) return;
    seed = seed * 1103515245u + 12345u;
    seed %= 97;
    const Status g = good.Advance(pick);
    if (!g.ok()) {
      CFGMASK_FUZZ_CHECK(g.code() == ErrorCode::kResourceLimit);
      return;
    }
    const Status st = bad.Advance(pick);
    if (!st.ok()) {
      CFGMASK_FUZZ_CHECK(!bad.store_status().ok());
      return;
    }
    if (good.IsTerminated()) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  if (size < 1 || size > (1 << 20)) return 0;
  if (data[0] % 4 == 2) {
    DamagedRows(data + 1, size - 1);
    return 0;
  }
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
