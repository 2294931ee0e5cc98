// Helpers shared by the libFuzzer targets of this folder: the readers under
// test take file paths, so each input is written to one scratch file per
// process (in /dev/shm when there is one).
#ifndef CFGMASK_TESTS_FUZZ_FUZZ_UTIL_H_
#define CFGMASK_TESTS_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cfgmask {

inline std::string FuzzEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A per-process scratch path ending in `suffix`.
inline const std::string& FuzzScratchPath(const char* suffix) {
  static const std::string path = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                                  "/cfgmask_fuzz_" + std::to_string(getpid()) + suffix;
  return path;
}

inline void FuzzWriteFile(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

// Aborts (a crash libFuzzer reports) when an invariant of the API fails.
#define CFGMASK_FUZZ_CHECK(cond)                                              \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_FUZZ_FUZZ_UTIL_H_
