// Teacher-forces pre-tokenised id streams through a cfgmask Session and times
// every step the way tests/bench/peers/engines.py times the other engines:
// fill the step's bitmask, check the forced token's bit, then advance.  After
// the last token one more mask is filled and its EOS bits are read.
//
//   cfgmask_peer_driver STORE.cfgm STREAMS.txt OUT.json [--fresh-session | --shared-memo | --no-memo]
//
// STREAMS.txt: one stream per line, "name<TAB>id id id ..." (ids in the
// store's vocabulary).  OUT.json: store load time, peak RSS, and per stream
// the number of tokens accepted, the index of the first token refused (-1 if
// none), whether EOS was allowed at the end, and the per-step fill and advance
// times in microseconds.  A refused token ends its stream (the session stays
// where it was).  Single thread.  Used by tests/bench/peers/run_peers.py; not
// part of the test suite.  By default one session is reset between streams,
// so its row memo (SessionLimits::memo_bytes) carries over, as the peers'
// caches do; --fresh-session starts every stream with a new session and a
// new memo (cold), --shared-memo with a new session sharing one memo (a
// server's session per request), --no-memo turns the memo off.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "runtime/session.h"

namespace {

struct Stream {
  std::string name;
  std::vector<int32_t> ids;
};

bool ReadStreams(const std::string& path, std::vector<Stream>* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Stream s;
    const size_t tab = line.find('\t');
    s.name = line.substr(0, tab);
    std::istringstream ids(tab == std::string::npos ? "" : line.substr(tab + 1));
    int64_t id;
    while (ids >> id) s.ids.push_back(static_cast<int32_t>(id));
    out->push_back(std::move(s));
  }
  return true;
}

// VmHWM of this process image (getrusage's maxrss survives exec and would
// count the parent's memory at fork).
int64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

bool Bit(const std::vector<uint32_t>& mask, int32_t t) { return (mask[t >> 5] >> (t & 31)) & 1u; }

void WriteTimes(std::FILE* f, const std::vector<double>& v) {
  std::fputc('[', f);
  for (size_t i = 0; i < v.size(); ++i) std::fprintf(f, i ? ",%.3f" : "%.3f", v[i]);
  std::fputc(']', f);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 5 ? argv[4] : "";
  if ((argc != 4 && argc != 5) || (argc == 5 && mode != "--fresh-session" &&
                                   mode != "--shared-memo" && mode != "--no-memo")) {
    std::fprintf(stderr,
                 "usage: cfgmask_peer_driver STORE.cfgm STREAMS.txt OUT.json "
                 "[--fresh-session | --shared-memo | --no-memo]\n");
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  cfgmask::CompiledStore store;
  const auto l0 = Clock::now();
  cfgmask::Status st = cfgmask::ReadStoreFile(argv[1], &store);
  const double load_s = std::chrono::duration<double>(Clock::now() - l0).count();
  if (!st.ok()) {
    std::fprintf(stderr, "cfgmask_peer_driver: %s\n", st.message().c_str());
    return 2;
  }
  std::vector<Stream> streams;
  if (!ReadStreams(argv[2], &streams)) {
    std::fprintf(stderr, "cfgmask_peer_driver: %s: cannot read\n", argv[2]);
    return 2;
  }
  std::FILE* out = std::fopen(argv[3], "w");
  if (!out) {
    std::fprintf(stderr, "cfgmask_peer_driver: %s: cannot write\n", argv[3]);
    return 2;
  }
  cfgmask::SessionLimits limits;
  if (mode == "--no-memo") limits.memo_bytes = 0;
  cfgmask::Session session(&store, limits);
  std::vector<uint32_t> mask(store.mask_words());
  std::fprintf(out, "{\"store_load_s\": %.6f, \"vocab_size\": %d, \"streams\": [\n", load_s,
               store.vocab_size);
  for (size_t k = 0; k < streams.size(); ++k) {
    const Stream& s = streams[k];
    if (mode == "--fresh-session") session = cfgmask::Session(&store, limits);
    if (mode == "--shared-memo") session = cfgmask::Session(&store, limits, session.memo());
    session.Reset();
    std::vector<double> fill_us, advance_us;
    int64_t first_reject = -1;
    std::string reason;
    for (size_t i = 0; i < s.ids.size(); ++i) {
      const int32_t tok = s.ids[i];
      const auto t0 = Clock::now();
      session.FillMask(mask.data());
      const auto t1 = Clock::now();
      fill_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      if (tok < 0 || tok >= store.vocab_size || !Bit(mask, tok)) {
        first_reject = static_cast<int64_t>(i);
        reason = "not in mask";
        break;
      }
      const auto t2 = Clock::now();
      cfgmask::Status a = session.Advance(tok);
      advance_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t2).count());
      if (!a.ok()) {
        first_reject = static_cast<int64_t>(i);
        reason = "advance refused";
        break;
      }
    }
    bool eos = false;
    if (first_reject < 0) {
      const auto t0 = Clock::now();
      session.FillMask(mask.data());
      fill_us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      for (int32_t e : store.eos_ids) eos = eos || Bit(mask, e);
    }
    const int64_t accepted = first_reject < 0 ? static_cast<int64_t>(s.ids.size()) : first_reject;
    std::fprintf(out,
                 "{\"name\": \"%s\", \"tokens\": %zu, \"accepted\": %" PRId64
                 ", \"first_reject\": %" PRId64 ", \"reason\": \"%s\", \"eos\": %s, \"fill_us\": ",
                 s.name.c_str(), s.ids.size(), accepted, first_reject, reason.c_str(),
                 eos ? "true" : "false");
    WriteTimes(out, fill_us);
    std::fputs(", \"advance_us\": ", out);
    WriteTimes(out, advance_us);
    std::fputs(k + 1 < streams.size() ? "},\n" : "}\n", out);
  }
  std::fprintf(out, "], \"mode\": \"%s\", \"memo_hits\": %" PRId64 ", \"memo_misses\": %" PRId64
               ", \"peak_rss_bytes\": %" PRId64 "}\n",
               mode.empty() ? "reset" : mode.c_str() + 2, session.memo_hits(), session.memo_misses(),
               PeakRssBytes());
  std::fclose(out);
  return 0;
}
