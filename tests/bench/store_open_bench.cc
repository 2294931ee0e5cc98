// Store opening: the time from a store file's path to a first mask, as a
// server pays it per process.  For each store given: ReadStoreFile (map,
// header, index checksum, validation; zero-copy views), the same with
// StoreReadOptions::verify (the whole payload's checksum), then a Session
// and its first FillMask.  The page cache is warm (the file is read once
// first), as for a store that serves; the bytes the process owns after
// opening are printed to show the arrays are views of the mapping.
// Not a test: build/tests/store_open_bench STORE.cfgm... [--runs N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/session.h"

namespace {

double Millis(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Figures {
  std::vector<double> ms;
  double Median() {
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  double Max() { return *std::max_element(ms.begin(), ms.end()); }
};

}  // namespace

int main(int argc, char** argv) {
  using cfgmask::CompiledStore;
  int runs = 11;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: store_open_bench STORE.cfgm... [--runs N]\n");
    return 2;
  }
  std::printf("%-28s %9s %9s %9s %9s %9s %11s\n", "store", "MiB", "open p50", "open max",
              "verify", "1st mask", "owned KiB");
  for (const std::string& path : paths) {
    {  // warm the page cache
      CompiledStore s;
      cfgmask::Status st = cfgmask::ReadStoreFile(path, &s, {.verify = true});
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 2;
      }
    }
    Figures open, verify, first;
    size_t owned = 0, file_bytes = 0;
    for (int r = 0; r < runs; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      CompiledStore s;
      cfgmask::Status st = cfgmask::ReadStoreFile(path, &s);
      auto t1 = std::chrono::steady_clock::now();
      if (!st.ok()) return 2;
      cfgmask::Session session(&s);
      std::vector<uint32_t> mask(s.mask_words());
      session.FillMask(mask.data());
      auto t2 = std::chrono::steady_clock::now();
      open.ms.push_back(Millis(t0, t1));
      first.ms.push_back(Millis(t1, t2));
      owned = s.OwnedBytes();
      CompiledStore v;
      auto t3 = std::chrono::steady_clock::now();
      st = cfgmask::ReadStoreFile(path, &v, {.verify = true});
      verify.ms.push_back(Millis(t3, std::chrono::steady_clock::now()));
    }
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fseek(f, 0, SEEK_END);
      file_bytes = static_cast<size_t>(std::ftell(f));
      std::fclose(f);
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    std::printf("%-28s %9.1f %9.2f %9.2f %9.2f %9.2f %11.1f\n", name.c_str(),
                file_bytes / 1048576.0, open.Median(), open.Max(), verify.Median(), first.Median(),
                owned / 1024.0);
  }
  return 0;
}
