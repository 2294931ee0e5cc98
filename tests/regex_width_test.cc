// Differential test of the one width rule (grammar/base/regex_width.cc over
// the tree of grammar/base/regex_parser.cc) against Lark's own
// get_regexp_width() (lark.utils): lark::RegexpWidth, by which the .lark
// reader sorts the alternatives of joined terminals and the lexer orders its
// terminals (priority, then max width, ...), must equal it; and the width
// CompileRegex reports (the same rule, without Lark's `\p{...}` rewrite) must
// equal re._parser's getwidth() of the pattern.  The patterns are every
// terminal (to_regexp()) of every grammar in grammar/lark/, of Lark's own
// grammars ($CFGMASK_LARK_GRAMMARS or the installed lark package) and of the
// real-grammar corpus when it has been fetched (tests/realgrammars/fetch.sh
// into $CFGMASK_REAL_GRAMMARS or .cache/grammars), plus a few constructs the
// lexer refuses but whose width Lark still reads (back-references,
// conditional groups, anchors, look-behinds of several characters).  The
// oracle is $CFGMASK_PYTHON running tests/tools/regex_width_oracle.py;
// without it the test is skipped, except under CI=true where it fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/base/regex_ast.h"
#include "grammar/lark_reader.h"
#include "grammar/terminal_join.h"
#include "lexer/regex/regex.h"
#include "tests/oracle_text.h"

namespace cfgmask {
namespace {

namespace fs = std::filesystem;
const std::string kSourceDir = CFGMASK_SOURCE_DIR;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

bool InCi() { return Env("CI") == "true"; }

std::string RunCapture(const std::string& cmd, int* rc) {
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  if (!pipe) {
    *rc = -1;
    return out;
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *rc = pclose(pipe);
  return out;
}

std::string LarkGrammarsDir() {
  if (std::string env = Env("CFGMASK_LARK_GRAMMARS"); !env.empty()) return env;
  int rc = 0;
  std::string out = RunCapture(ShellQuote(Env("CFGMASK_PYTHON")) +
                                   " -c 'import lark,os;print(os.path.dirname(lark.__file__))'"
                                   " 2>/dev/null",
                               &rc);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return rc == 0 && !out.empty() ? out + "/grammars" : "";
}

std::string Hex(const std::string& s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string Decimal(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

struct GrammarFile {
  std::string path;
  std::vector<std::string> start;
};

// The start rules the corpus table names for each fetched grammar.
std::map<std::string, std::string> CorpusStarts() {
  std::ifstream in(kSourceDir + "/tests/realgrammars/table.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::map<std::string, std::string> starts;
  const std::regex entry("\"file\": \"([^\"]+)\",\\s*\"start\": \"([^\"]+)\"");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), entry); it != std::sregex_iterator();
       ++it) {
    starts[(*it)[1].str()] = (*it)[2].str();
  }
  return starts;
}

std::vector<GrammarFile> GrammarFiles(const std::string& lark_dir, int* corpus_files) {
  std::vector<GrammarFile> files;
  for (const auto& entry : fs::directory_iterator(kSourceDir + "/grammar/lark")) {
    if (entry.path().extension() != ".lark") continue;
    std::vector<std::string> start = {"start"};
    if (entry.path().filename() == "python.lark") start = {"file_input"};
    files.push_back({entry.path().string(), start});
  }
  if (!lark_dir.empty()) {
    files.push_back({lark_dir + "/python.lark", {"file_input"}});
    files.push_back({lark_dir + "/lark.lark", {"start"}});
    files.push_back({lark_dir + "/common.lark", {"start"}});
  }
  std::string corpus = Env("CFGMASK_REAL_GRAMMARS");
  if (corpus.empty()) corpus = kSourceDir + "/.cache/grammars";
  *corpus_files = 0;
  if (fs::is_directory(corpus)) {
    for (const auto& [file, start] : CorpusStarts()) {
      fs::path p = fs::path(corpus) / file;
      if (!fs::exists(p)) continue;
      files.push_back({p.string(), {start}});
      ++*corpus_files;
    }
  }
  return files;
}

// Constructs the lexer refuses whose width Lark still reads, and a few that
// sre_parse rejects.
const char* const kExtraPatterns[] = {
    "(a)\\1",           "(?P<n>ab)(?P=n){3}", "(a)(?(1)b|cd)", "(?P<g>x)?(?(g)yz)",
    "^a$\\b\\B\\A\\Z",  "(?<=ab)c",           "(?<!a|bc)d",    "(?=abc)ab",
    "(?>ab|c)+",        "a*+b?+",             "\\p{Lu}\\p{Ll}+", "\\\\p{L}",
    "(?x) a b # c\n d", "a{,3}b{2,}",         "a**",           "(?(2)a|b)(c)",
    "x{",               "[]a]{4}",            "(?i:\\N{DIGIT ONE})",
};

TEST(RegexWidthDifferentialTest, EveryTerminalOfEveryGrammarAsLark) {
  if (Env("CFGMASK_PYTHON").empty()) {
    if (InCi()) FAIL() << "CFGMASK_PYTHON must be set in CI (the Lark oracle)";
    GTEST_SKIP() << "CFGMASK_PYTHON is not set; Lark oracle unavailable";
  }
  const std::string lark_dir = LarkGrammarsDir();
  ASSERT_FALSE(lark_dir.empty()) << "no lark grammars folder";
  int corpus_files = 0;
  std::vector<GrammarFile> files = GrammarFiles(lark_dir, &corpus_files);
  std::set<std::string> pattern_set;
  int read = 0;
  for (const GrammarFile& f : files) {
    LarkReaderOptions options;
    options.lark_grammars_dir = lark_dir;
    options.import_paths = {fs::path(f.path).parent_path().string()};
    options.start = f.start;
    Grammar g;
    Status st = ReadLarkFile(f.path, options, &g);
    if (!st.ok() && fs::path(f.path).filename() == "common.lark") continue;  // terminals only
    ASSERT_TRUE(st.ok()) << f.path << ": " << st.message();
    ++read;
    for (const TerminalDef& t : g.terminals) pattern_set.insert(t.ToRegexp());
  }
  for (const char* p : kExtraPatterns) pattern_set.insert(p);
  const std::vector<std::string> patterns(pattern_set.begin(), pattern_set.end());
  std::printf("regex widths: %zu patterns from %d grammars (%d of the real-grammar corpus)\n",
              patterns.size(), read, corpus_files);
  if (corpus_files == 0) {
    std::printf("note: the real-grammar corpus is not fetched (tests/realgrammars/fetch.sh)\n");
  }

  const std::string list = testing::TempDir() + "/regex_width_patterns.hex";
  {
    std::ofstream out(list);
    for (const std::string& p : patterns) out << Hex(p) << "\n";
  }
  int rc = 0;
  std::string answer = RunCapture(ShellQuote(Env("CFGMASK_PYTHON")) + " " +
                                      ShellQuote(kSourceDir + "/tests/tools/regex_width_oracle.py") +
                                      " " + ShellQuote(list),
                                  &rc);
  ASSERT_EQ(rc, 0) << answer;
  std::istringstream lines(answer);
  int exact = 0, lexer_checked = 0;
  for (const std::string& p : patterns) {
    std::string row;
    ASSERT_TRUE(std::getline(lines, row)) << "the oracle answered fewer lines";
    const size_t tab = row.find('\t');
    ASSERT_NE(tab, std::string::npos) << row;
    const std::string line = row.substr(0, tab);  // Lark's get_regexp_width
    const std::string sre = row.substr(tab + 1);  // re._parser's getwidth()
    Nfa nfa;
    RegexWidth lexer;
    if (CompileRegex(p, "", "T", &nfa, &lexer).ok()) {
      EXPECT_EQ(Decimal(lexer.lo) + " " + Decimal(lexer.hi), sre) << "lexer width of " << p;
      ++lexer_checked;
    }
    RegexWidth ours;
    const bool parsed = lark::RegexpWidth(p, &ours);
    if (line == "E") {
      EXPECT_FALSE(parsed) << "Lark refuses " << p;
      continue;
    }
    std::istringstream words(line);
    std::string lo, hi;
    words >> lo >> hi;
    if (!parsed) {
      // sre_parse refused it and Lark asked the `regex` module whether the
      // empty string matches: the maximum is MAXWIDTH (our minimum is 0).
      EXPECT_EQ(Decimal(ours.hi), hi) << p;
      continue;
    }
    EXPECT_EQ(Decimal(ours.lo) + " " + Decimal(ours.hi), lo + " " + hi) << "pattern " << p;
    ++exact;
  }
  std::printf("regex widths: %d equal to Lark's (lark::RegexpWidth), %d CompileRegex widths equal to re._parser's\n",
              exact, lexer_checked);
  EXPECT_GT(exact, 100);
  EXPECT_GT(lexer_checked, 100);
}

}  // namespace
}  // namespace cfgmask
