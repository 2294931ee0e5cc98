// Test helper: compiles a grammar + tokenizer once and caches the store file
// under $CFGMASK_TEST_CACHE (default /tmp/cfgmask-test-cache), keyed by the
// grammar path and its file's time and size, start rule, tokenizer and the
// build of the cfgmask library the test is linked with (its file's time and
// size), so all tests of one build share one compile of each store and an
// edited grammar is compiled again.
//
// $CFGMASK_TEST_COMPILER, when set, names a cfgmask binary that compiles
// the stores the cache lacks (`cfgmask compile`, in a subprocess) instead
// of the library the test is linked with.  tests/sanitize.sh points it at
// the optimised build: the sanitizer run then loads the stores and runs
// everything after the compile under the sanitizer (the store reader, the
// sessions, the tools) without the instrumented compile of each large store
// (minutes each); the compile itself runs under the sanitizer in the tests
// that call CompileStore directly.
//
// $CFGMASK_TEST_STORE_LIBS, when set, names the libraries (':'-separated)
// whose build keys the stores in place of the test's own: the optimised
// build's (build/tests/core_libs.txt), so that with CFGMASK_TEST_CACHE and
// CFGMASK_TEST_COMPILER pointing at that build the sanitizer run loads the
// stores the optimised run compiled instead of compiling them again.  Such a
// store equals what the compiler writes with --no-streamline, the compile's
// statistics aside (seconds, row_bytes_before).
#ifndef CFGMASK_TESTS_TEST_STORE_CACHE_H_
#define CFGMASK_TESTS_TEST_STORE_CACHE_H_

#include <sys/stat.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "maskstore/compiled_store.h"
#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"

namespace cfgmask {

inline std::string TestEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

inline bool TestQuick() { return TestEnv("CFGMASK_QUICK") == "1" && TestEnv("CFGMASK_FULL") != "1"; }

// True in the AddressSanitizer build (tests/sanitize.sh).  A differential
// test that repeats one code path many times may take fewer cases there, to
// look for memory errors rather than wrong answers; the optimised build runs
// it at its full size (CI size, or CFGMASK_FULL).
inline bool TestSanitized() {
#if defined(__SANITIZE_ADDRESS__)
  return TestEnv("CFGMASK_FULL") != "1";
#else
  return false;
#endif
}

inline const CompiledStore* CachedTestStore(const std::string& grammar, const std::string& tokenizer,
                                            const std::string& start, Status* status) {
  static std::map<std::string, std::unique_ptr<CompiledStore>> cache;
  std::string build = std::string(__DATE__) + __TIME__;
#ifdef CFGMASK_CORE_LIB
  // The engine's libraries, ':'-separated.
  std::string libs = CFGMASK_CORE_LIB, stamp;
  if (!TestEnv("CFGMASK_TEST_STORE_LIBS").empty()) libs = TestEnv("CFGMASK_TEST_STORE_LIBS");
  for (size_t from = 0; from <= libs.size();) {
    size_t to = libs.find(':', from);
    if (to == std::string::npos) to = libs.size();
    struct stat lib;
    if (stat(libs.substr(from, to - from).c_str(), &lib) == 0) {
      stamp += std::to_string(lib.st_mtim.tv_sec) + "." + std::to_string(lib.st_mtim.tv_nsec) +
               "." + std::to_string(lib.st_size) + ";";
    }
    from = to + 1;
  }
  if (!stamp.empty()) build = stamp;
#endif
  std::string grammar_version;
  struct stat g;
  if (stat(grammar.c_str(), &g) == 0) {
    grammar_version = std::to_string(g.st_mtim.tv_sec) + "." + std::to_string(g.st_mtim.tv_nsec) +
                      "." + std::to_string(g.st_size);
  }
  const std::string key =
      grammar + "|" + grammar_version + "|" + start + "|" + tokenizer + "|" + build;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  std::string dir = TestEnv("CFGMASK_TEST_CACHE");
  if (dir.empty()) dir = "/tmp/cfgmask-test-cache";
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + std::to_string(std::hash<std::string>()(key)) + ".cfgm";
  auto store = std::make_unique<CompiledStore>();
  *status = ReadStoreFile(path, store.get());
  const std::string compiler = TestEnv("CFGMASK_TEST_COMPILER");
  if (!status->ok() && !compiler.empty()) {
    auto quote = [](const std::string& a) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q + "'";
    };
    std::string cmd = quote(compiler) + " compile " + quote(grammar) + " --tokenizer " +
                      quote(tokenizer) + " --no-streamline -o " + quote(path) + " >/dev/null";
    if (!start.empty()) cmd += " --start " + quote(start);
    if (std::system(cmd.c_str()) != 0) {
      *status = Status(ErrorCode::kInvalidArgument, "CFGMASK_TEST_COMPILER failed: " + cmd);
      return nullptr;
    }
    *status = ReadStoreFile(path, store.get());
    if (!status->ok()) return nullptr;
  }
  if (!status->ok()) {
    CompileOptions opt;
    opt.start = start;
    *status = CompileStore(grammar, tokenizer, opt, store.get());
    if (!status->ok()) return nullptr;
    WriteStoreFile(*store, path);
  }
  return cache.emplace(key, std::move(store)).first->second.get();
}

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_TEST_STORE_CACHE_H_
