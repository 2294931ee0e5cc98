// The Bison oracle for parser/lalr.cc and parser/bison_export.cc: ExportBison
// writes a .y, `bison -Wnone -v` builds its own LALR(1) automaton, and its
// .output report must show one state more than our table (the state after
// `$accept: S $end .`, see bison_export.cc) and the same shift/reduce and
// reduce/reduce counts, on the textbook grammars and 60 random ones.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "parser/lalr.h"
#include "tests/parser_test_grammars.h"

namespace cfgmask {
namespace {

struct BisonReport {
  bool ok = false;
  int states = 0;
  int shift_reduce = 0;
  int reduce_reduce = 0;
  std::string error;
};

const char* BisonPath() {
  static const char* path = access("/usr/bin/bison", X_OK) == 0 ? "/usr/bin/bison" : "bison";
  return path;
}

// Runs bison on `y_text` and reads the .output report: "State N" headers and
// the "State N conflicts: X shift/reduce, Y reduce/reduce" lines.
BisonReport RunBison(const std::string& y_text, const std::string& name) {
  BisonReport report;
  char dir_template[] = "/tmp/cfgmask_bison_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    report.error = "mkdtemp failed";
    return report;
  }
  const std::string base = std::string(dir) + "/" + name;
  std::ofstream(base + ".y") << y_text;
  const std::string command = std::string(BisonPath()) + " -Wnone -v -o " + base + ".tab.c " +
                              base + ".y > " + base + ".log 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream output_file(base + ".output");
  std::stringstream output;
  output << output_file.rdbuf();
  if (rc != 0) {
    std::ifstream log(base + ".log");
    std::stringstream text;
    text << log.rdbuf();
    report.error = "bison failed: " + text.str();
  } else {
    const std::regex header("^State [0-9]+$");
    const std::regex conflicts("^State [0-9]+ conflicts:(.*)$");
    const std::regex sr("([0-9]+) shift/reduce");
    const std::regex rr("([0-9]+) reduce/reduce");
    std::string line;
    while (std::getline(output, line)) {
      std::smatch m;
      if (std::regex_match(line, header)) {
        ++report.states;
      } else if (std::regex_match(line, m, conflicts)) {
        const std::string counts = m[1];
        std::smatch c;
        if (std::regex_search(counts, c, sr)) report.shift_reduce += std::stoi(c[1]);
        if (std::regex_search(counts, c, rr)) report.reduce_reduce += std::stoi(c[1]);
      }
    }
    report.ok = true;
  }
  std::system(("rm -rf " + std::string(dir)).c_str());
  return report;
}

bool HaveBison() {
  return std::system((std::string(BisonPath()) + " --version > /dev/null 2>&1").c_str()) == 0;
}

// Our counts against Bison's; returns false when Lark's pooled lookaheads
// (LalrStats::lark_extra_lookaheads) make the conflict counts incomparable.
bool ExpectMatchesBison(const Grammar& g, const std::string& label) {
  ParseTables t;
  LalrStats stats;
  const Status status = BuildParseTables(g, &t, &stats);
  const BisonReport bison = RunBison(ExportBison(g), "g");
  EXPECT_TRUE(bison.ok) << label << ": " << bison.error << "\n" << ExportBison(g);
  if (!bison.ok) return true;
  EXPECT_EQ(bison.states, stats.lr0_states + 1) << label << "\n" << ExportBison(g);
  if (status.ok()) {
    EXPECT_EQ(t.num_states, stats.lr0_states);
  }
  if (stats.lark_extra_lookaheads > 0) return false;
  EXPECT_EQ(bison.shift_reduce, stats.shift_reduce) << label << "\n" << ExportBison(g);
  EXPECT_EQ(bison.reduce_reduce, stats.reduce_reduce) << label << "\n" << ExportBison(g);
  return true;
}

TEST(BisonExportTest, ExportFormat) {
  const Grammar g = parser_test::MakeGrammar("S: a S b | ; T: c");
  Grammar two = g;
  two.start = {"S", "T"};
  const std::string y = ExportBison(two, 1);
  EXPECT_NE(y.find("%token a\n%token b\n%token c\n"), std::string::npos) << y;
  EXPECT_NE(y.find("%start T\n"), std::string::npos) << y;
  EXPECT_NE(y.find("%%\nS: a S b ;\nS: %empty ;\nT: c ;\n%%\n"), std::string::npos) << y;
}

TEST(BisonExportTest, NamesBisonCannotTakeAreRenamed) {
  // A terminal called "error", one called "(", a YY name, and a terminal and
  // a nonterminal that share a name.
  Grammar g = parser_test::MakeGrammar("s: error ( YYEOF x | t; t: u; u: x");
  g.terminals.back().name = "t";  // terminal "x" now clashes with nonterminal t
  const std::string y = ExportBison(g);
  EXPECT_EQ(y.find("%token error"), std::string::npos) << y;
  EXPECT_EQ(y.find("%token YYEOF"), std::string::npos) << y;
  EXPECT_EQ(y.find("%token (\n"), std::string::npos) << y;
  if (!HaveBison()) GTEST_SKIP() << "bison not found";
  ExpectMatchesBison(g, "renamed");
}

TEST(BisonExportTest, TextbookGrammarsMatchBison) {
  if (!HaveBison()) GTEST_SKIP() << "bison not found";
  const std::vector<std::string> specs = parser_test::TextbookGrammars();
  for (size_t i = 0; i < specs.size(); ++i) {
    ExpectMatchesBison(parser_test::MakeGrammar(specs[i]), specs[i]);
  }
}

TEST(BisonExportTest, RandomGrammarsMatchBison) {
  if (!HaveBison()) GTEST_SKIP() << "bison not found";
  constexpr uint32_t kGrammars = 60;
  int compared = 0, with_conflicts = 0;
  for (uint32_t seed = 1; seed <= kGrammars; ++seed) {
    const Grammar g = parser_test::RandomGrammar(seed);
    ParseTables t;
    LalrStats stats;
    BuildParseTables(g, &t, &stats).ok();
    with_conflicts += stats.shift_reduce + stats.reduce_reduce > 0;
    compared += ExpectMatchesBison(g, "random grammar, seed " + std::to_string(seed));
  }
  std::printf("%d of %u random grammars compared with Bison, %d with conflicts\n", compared,
              kGrammars, with_conflicts);
  EXPECT_GE(compared, 50);
  EXPECT_GE(with_conflicts, 10);
}

TEST(BisonExportTest, PythonSizedGrammarMatchesBison) {
  // A larger grammar: expressions with precedence levels, statements, lists.
  const Grammar g = parser_test::MakeGrammar(
      "file: stmts; stmts: stmts stmt | ; stmt: simple nl | if_stmt | while_stmt;"
      "simple: expr | name = expr | pass | return opt_expr;"
      "opt_expr: expr | ; if_stmt: if expr : block elifs else_part;"
      "elifs: elifs elif expr : block | ; else_part: else : block | ;"
      "while_stmt: while expr : block; block: nl indent stmts stmt dedent;"
      "expr: expr or and_e | and_e; and_e: and_e and not_e | not_e; not_e: not not_e | cmp;"
      "cmp: cmp < sum | cmp == sum | sum; sum: sum + term | sum - term | term;"
      "term: term * factor | term / factor | factor; factor: - factor | power;"
      "power: atom ** factor | atom; atom: name | number | ( expr ) | [ list ] | atom ( args );"
      "list: expr | list , expr | ; args: expr | args , expr | ");
  if (!HaveBison()) GTEST_SKIP() << "bison not found";
  EXPECT_TRUE(ExpectMatchesBison(g, "python-sized"));
}

}  // namespace
}  // namespace cfgmask
