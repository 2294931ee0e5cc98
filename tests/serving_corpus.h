// Test helper for the serving-runtime tests (batch_test.cc,
// serving_test.cc): real texts, teacher-forced as token sequences.
//  - Python: files of the interpreter's standard library
//    (sysconfig.get_paths()['stdlib'] of $CFGMASK_PYTHON, or $CFGMASK_STDLIB),
//    by name order, within a size range, python.lark with start file_input;
//  - SQL: the statements tests/corpus/harvest_sql.py harvests and SQLite's
//    parser accepts, grammar/lark/sql.lark with start `start`.
// A text is cut into tokens greedily (runtime/segment.h Segmenter) and kept only
// if a session accepts every token and may end after the last one, so a
// consumer can advance by the tokens without checking.
#ifndef CFGMASK_TESTS_SERVING_CORPUS_H_
#define CFGMASK_TESTS_SERVING_CORPUS_H_

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/tools/sample.h"
#include "runtime/session.h"
#include "tests/test_store_cache.h"

namespace cfgmask {

inline std::string PythonGrammarPath() { return TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark"; }
inline std::string SqlGrammarPath() { return std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/sql.lark"; }

// python.lark / sql.lark with the given tokenizer file, compiled once per
// test binary (test_store_cache.h).
inline const CompiledStore* PythonStore(const std::string& tokenizer, Status* st) {
  return CachedTestStore(PythonGrammarPath(), tokenizer, "file_input", st);
}
// cfgmask's strict Python grammar, start file_input.
inline const CompiledStore* StrictPythonStore(const std::string& tokenizer, Status* st) {
  return CachedTestStore(std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/python.lark", tokenizer,
                         "file_input", st);
}
inline const CompiledStore* SqlStore(const std::string& tokenizer, Status* st) {
  return CachedTestStore(SqlGrammarPath(), tokenizer, "start", st);
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string StdlibDir() {
  std::string dir = TestEnv("CFGMASK_STDLIB");
  if (!dir.empty()) return dir;
  const std::string cmd = TestEnv("CFGMASK_PYTHON") +
                          " -c \"import sysconfig; print(sysconfig.get_paths()['stdlib'])\"";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  if (p && std::fgets(buf, sizeof buf, p)) dir = buf;
  if (p) pclose(p);
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
  return dir;
}

// Up to n standard-library modules (top level) of [min_bytes, max_bytes],
// spread evenly over the name-sorted list.
inline std::vector<std::string> StdlibTexts(size_t n, uintmax_t min_bytes, uintmax_t max_bytes) {
  std::vector<std::string> paths;
  const std::string dir = StdlibDir();
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return {};
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".py" && e.file_size() >= min_bytes && e.file_size() <= max_bytes) {
      paths.push_back(e.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  const size_t stride = std::max<size_t>(1, paths.size() / std::max<size_t>(1, n));
  for (size_t i = 0; i < paths.size() && out.size() < n; i += stride) {
    out.push_back(ReadWholeFile(paths[i]));
  }
  return out;
}

// Up to n of the harvested SQLite statements, spread evenly.
inline std::vector<std::string> SqlTexts(size_t n) {
  static std::vector<std::string> all;
  if (all.empty()) {
    char dir[] = "/tmp/cfgmask_serving_sql_XXXXXX";
    if (!mkdtemp(dir)) return {};
    const std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                            "/tests/corpus/harvest_sql.py --quiet " + dir + " > /dev/null";
    if (std::system(cmd.c_str()) == 0) {
      std::vector<std::string> paths;
      std::error_code ec;
      for (const auto& e :
           std::filesystem::directory_iterator(std::string(dir) + "/sql/valid", ec)) {
        paths.push_back(e.path().string());
      }
      std::sort(paths.begin(), paths.end());
      for (const auto& p : paths) all.push_back(ReadWholeFile(p));
    }
    std::filesystem::remove_all(dir);
  }
  std::vector<std::string> out;
  const size_t stride = std::max<size_t>(1, all.size() / std::max<size_t>(1, n));
  for (size_t i = 0; i < all.size() && out.size() < n; i += stride) out.push_back(all[i]);
  return out;
}

struct ForcedText {
  std::string text;
  std::vector<int32_t> tokens;  // greedy segmentation, every token accepted in turn
};

// The texts whose greedy segmentation a session of `store` accepts token by
// token, ending with the text complete.
inline std::vector<ForcedText> ForceTexts(const CompiledStore* store,
                                          const std::vector<std::string>& texts) {
  const Segmenter segmenter(*store);
  std::vector<ForcedText> out;
  for (const std::string& text : texts) {
    ForcedText f{text, {}};
    Session s(store);
    bool ok = true;
    for (const Segment& seg : segmenter.Cut(text, SegmentMode::kGreedy, nullptr)) {
      ok = seg.token >= 0 && s.Advance(seg.token).ok();
      if (!ok) break;
      f.tokens.push_back(seg.token);
    }
    if (ok && s.CanEnd() && !f.tokens.empty()) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_SERVING_CORPUS_H_
