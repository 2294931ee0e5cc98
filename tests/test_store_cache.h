// Test helper: compiles a grammar + tokenizer once and caches the store file
// under $CFGMASK_TEST_CACHE (default /tmp/cfgmask-test-cache), keyed by the
// grammar path and its file's time and size, start rule, tokenizer and the
// build of the cfgmask library the test is linked with (its file's time and
// size), so all tests of one build share one compile of each store and an
// edited grammar is compiled again.
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

inline const CompiledStore* CachedTestStore(const std::string& grammar, const std::string& tokenizer,
                                            const std::string& start, Status* status) {
  static std::map<std::string, std::unique_ptr<CompiledStore>> cache;
  std::string build = std::string(__DATE__) + __TIME__;
#ifdef CFGMASK_CORE_LIB
  // The engine's libraries, ':'-separated.
  std::string libs = CFGMASK_CORE_LIB, stamp;
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
