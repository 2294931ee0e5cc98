// Tests of the LALR(1) construction (parser/lr0.cc, lalr.cc, conflicts.cc,
// parse_tables.cc) on textbook grammars with known LR(0) state counts and
// LALR(1) lookaheads (Aho, Sethi & Ullman, "Compilers", 1986: grammar 4.19,
// examples 4.48 and 4.55, the dangling else of 4.9), the error paths, and
// python.lark against Lark's own table (tests/tools/lark_tables.py) when the
// .lark reader is there.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "gtest/gtest.h"
#include "parser/lalr.h"
#include "tests/parser_test_grammars.h"

#if __has_include("grammar/lark_reader.cc")
#include "grammar/lark_reader.h"
#define CFGMASK_HAVE_LARK_READER 1
#else
#define CFGMASK_HAVE_LARK_READER 0
#endif

namespace cfgmask {
namespace {

using parser_test::MakeGrammar;

int32_t Terminal(const Grammar& g, const std::string& name) {
  for (int32_t t = 0; t < g.num_terminals(); ++t) {
    if (g.terminals[t].name == name) return t;
  }
  ADD_FAILURE() << "no terminal " << name;
  return -1;
}

int32_t Nonterminal(const Grammar& g, const std::string& name) {
  for (size_t k = 0; k < g.nonterminals.size(); ++k) {
    if (g.nonterminals[k] == name) return static_cast<int32_t>(k);
  }
  ADD_FAILURE() << "no nonterminal " << name;
  return -1;
}

std::vector<std::string> Names(const Grammar& g, const std::vector<int32_t>& terminals) {
  std::vector<std::string> names;
  for (int32_t t : terminals) names.push_back(g.terminals[t].name);
  std::sort(names.begin(), names.end());
  return names;
}

// Terminals on which `state` reduces by `rule`, by name ("$END" included).
std::vector<std::string> ReduceLookaheads(const Grammar& g, const ParseTables& t, int32_t state,
                                          int32_t rule) {
  std::vector<std::string> names;
  for (int32_t term = 0; term < t.num_terminals; ++term) {
    if (t.Action(state, term) == -(rule + 1)) {
      names.push_back(term == t.end_terminal ? "$END" : g.terminals[term].name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The state reached from the start state by a sequence of symbol names.
int32_t Walk(const Grammar& g, const ParseTables& t, const std::vector<std::string>& symbols) {
  int32_t state = t.start_state[0];
  for (const std::string& s : symbols) {
    bool found = false;
    for (int32_t term = 0; term < g.num_terminals() && !found; ++term) {
      if (g.terminals[term].name == s) {
        const int32_t a = t.Action(state, term);
        EXPECT_GT(a, 0) << "no shift on " << s;
        state = a - 1;
        found = true;
      }
    }
    if (!found) state = t.Goto(state, Nonterminal(g, s));
  }
  return state;
}

Status Build(const Grammar& g, ParseTables* t, LalrStats* stats = nullptr) {
  return BuildParseTables(g, t, stats);
}

TEST(LalrTest, ExpressionGrammarHasTwelveStates) {
  // Grammar 4.19 / Fig. 4.35: the canonical LR(0) collection I0..I11.
  const Grammar g = MakeGrammar("E: E + T | T; T: T * F | F; F: ( E ) | id");
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(Build(g, &t, &stats).ok());
  EXPECT_EQ(t.num_states, 12);
  EXPECT_EQ(stats.lr0_states, 12);
  EXPECT_EQ(stats.shift_reduce, 0);
  EXPECT_EQ(stats.reduce_reduce, 0);
  EXPECT_TRUE(t.resolved_conflicts.empty());
  EXPECT_EQ(ConflictReport(g, t), "");
  // E -> T . reduces on + ) $END, and T -> T . * F shifts *.
  const int32_t after_t = Walk(g, t, {"T"});
  EXPECT_EQ(ReduceLookaheads(g, t, after_t, 1), (std::vector<std::string>{"$END", ")", "+"}));
  EXPECT_GT(t.Action(after_t, Terminal(g, "*")), 0);
  EXPECT_EQ(Names(g, t.AcceptedTerminals(t.start_state[0])), (std::vector<std::string>{"(", "id"}));
  EXPECT_EQ(t.Action(Walk(g, t, {"E"}), t.end_terminal), kAcceptAction);
  EXPECT_EQ(t.accessing_symbol[t.start_state[0]], -1);
  EXPECT_EQ(t.accessing_symbol[after_t], g.num_terminals() + Nonterminal(g, "T"));
  EXPECT_NE(t.DebugString(g).find("state 0:"), std::string::npos);
}

TEST(LalrTest, Example455LookaheadsOfMergedStates) {
  // Example 4.55: S -> C C, C -> c C | d.  Seven LR(0) states; the merged
  // states I36, I47, I89 reduce on c, d and $.
  const Grammar g = MakeGrammar("S: C C; C: c C | d");
  ParseTables t;
  ASSERT_TRUE(Build(g, &t).ok());
  EXPECT_EQ(t.num_states, 7);
  const std::vector<std::string> all = {"$END", "c", "d"};
  EXPECT_EQ(ReduceLookaheads(g, t, Walk(g, t, {"d"}), 2), all);           // I47
  EXPECT_EQ(ReduceLookaheads(g, t, Walk(g, t, {"c", "C"}), 1), all);      // I89
  EXPECT_EQ(ReduceLookaheads(g, t, Walk(g, t, {"C", "C"}), 0),
            (std::vector<std::string>{"$END"}));                         // I5
  EXPECT_EQ(Walk(g, t, {"c"}), Walk(g, t, {"C", "c"}));                   // I36 merged
}

TEST(LalrTest, LalrButNotSlr) {
  // Example 4.48: S -> L = R | R, L -> * R | id, R -> L.  SLR puts '=' (in
  // FOLLOW(R)) on R -> L . in I2 and conflicts with the shift of '='; LALR
  // gives that item only $END.
  const Grammar g = MakeGrammar("S: L = R | R; L: * R | id; R: L");
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(Build(g, &t, &stats).ok());
  EXPECT_EQ(t.num_states, 10);
  EXPECT_EQ(stats.shift_reduce, 0);
  const int32_t i2 = Walk(g, t, {"L"});
  EXPECT_EQ(ReduceLookaheads(g, t, i2, 4), (std::vector<std::string>{"$END"}));
  EXPECT_GT(t.Action(i2, Terminal(g, "=")), 0);
  // R -> L . after "* L" reduces on = and $END (I8).
  EXPECT_EQ(ReduceLookaheads(g, t, Walk(g, t, {"*", "L"}), 4),
            (std::vector<std::string>{"$END", "="}));
}

TEST(LalrTest, NullableSymbolsUseReadsRelation) {
  // Read sets through nullable A and B: the start state reads a, b and c.
  const Grammar g = MakeGrammar("S: A B c; A: a | ; B: b | ");
  ParseTables t;
  ASSERT_TRUE(Build(g, &t).ok());
  EXPECT_EQ(Names(g, t.AcceptedTerminals(t.start_state[0])),
            (std::vector<std::string>{"a", "b", "c"}));
  // A -> <empty> reduces on b and c.
  EXPECT_EQ(ReduceLookaheads(g, t, t.start_state[0], 2), (std::vector<std::string>{"b", "c"}));
}

TEST(LalrTest, IncludesRelationCarriesFollow) {
  // X ends both S-alternatives, so its reductions see what follows S inside
  // the parentheses and at the end.
  const Grammar g = MakeGrammar("S: a X | ( S ); X: x Y; Y: y | ");
  ParseTables t;
  ASSERT_TRUE(Build(g, &t).ok());
  // Y -> <empty> after "a x" (and after "( a x") reduces on ) and $END.
  EXPECT_EQ(ReduceLookaheads(g, t, Walk(g, t, {"a", "x"}), 4),
            (std::vector<std::string>{"$END", ")"}));
  EXPECT_EQ(Walk(g, t, {"a", "x"}), Walk(g, t, {"(", "a", "x"}));
}

TEST(LalrTest, ShiftReduceResolvedAsShift) {
  const Grammar g = MakeGrammar("S: if E then S | if E then S else S | x; E: b");
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(Build(g, &t, &stats).ok());
  EXPECT_EQ(stats.shift_reduce, 1);
  EXPECT_EQ(stats.reduce_reduce, 0);
  ASSERT_EQ(t.resolved_conflicts.size(), 1u);
  const ParseTables::Conflict& c = t.resolved_conflicts[0];
  EXPECT_TRUE(c.shift_reduce);
  EXPECT_EQ(c.terminal, Terminal(g, "else"));
  EXPECT_EQ(c.rules, (std::vector<int32_t>{0}));
  const int32_t state = Walk(g, t, {"if", "E", "then", "S"});
  EXPECT_EQ(c.state, state);
  EXPECT_GT(t.Action(state, Terminal(g, "else")), 0);
  EXPECT_EQ(t.Action(state, t.end_terminal), -1);
  const std::string report = ConflictReport(g, t);
  EXPECT_NE(report.find("State " + std::to_string(state) + " conflicts: 1 shift/reduce\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("on else: shift wins over reduce by rule 0 (S: if E then S)"),
            std::string::npos)
      << report;
}

TEST(LalrTest, ReduceReduceIsAnErrorNamingTerminalRulesAndSample) {
  // LR(1) but not LALR(1): merging the states after "a c" and "b c" makes
  // A -> c and B -> c both reduce on d and on e.
  const Grammar g = MakeGrammar("S: a A d | b B d | a B e | b A e; A: c; B: c");
  ParseTables t;
  LalrStats stats;
  const Status status = Build(g, &t, &stats);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::kGrammarSemantics);
  const std::string& m = status.message();
  EXPECT_NE(m.find("reduce/reduce conflict on terminal 'd'"), std::string::npos) << m;
  EXPECT_NE(m.find("'A: c'"), std::string::npos) << m;
  EXPECT_NE(m.find("'B: c'"), std::string::npos) << m;
  EXPECT_NE(m.find("reached by: a c"), std::string::npos) << m;
  EXPECT_NE(m.find("and 1 more"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(stats.reduce_reduce, 2);
  EXPECT_EQ(t.num_states, 0) << "tables written on error";
}

TEST(LalrTest, ReduceReduceResolvedByPriority) {
  const Grammar g = MakeGrammar("S: a A d | b B d | a B e | b A e; A.2: c; B: c");
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(Build(g, &t, &stats).ok());
  EXPECT_EQ(stats.reduce_reduce, 2);
  EXPECT_EQ(stats.reduce_reduce_resolved, 2);
  const int32_t state = Walk(g, t, {"a", "c"});
  EXPECT_EQ(ReduceLookaheads(g, t, state, 4), (std::vector<std::string>{"d", "e"}));
  ASSERT_EQ(t.resolved_conflicts.size(), 2u);
  EXPECT_FALSE(t.resolved_conflicts[0].shift_reduce);
  EXPECT_EQ(t.resolved_conflicts[0].rules, (std::vector<int32_t>{4, 5}));
  const std::string report = ConflictReport(g, t);
  EXPECT_NE(report.find("conflicts: 2 reduce/reduce"), std::string::npos) << report;
  EXPECT_NE(report.find("reduce by rule 4 (A: c) [priority 2] wins over rule 5 (B: c) [priority 0]"),
            std::string::npos)
      << report;
}

TEST(LalrTest, ReduceReduceWithShiftIsStillAnError) {
  // Lark checks reduce/reduce before shift/reduce: the shift of A does not
  // save the tie between x and y.
  const Grammar g = MakeGrammar("s: x A | y A | A B | A x; x: A; y: A");
  ParseTables t;
  LalrStats stats;
  const Status status = Build(g, &t, &stats);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("on terminal 'A'"), std::string::npos) << status.message();
  EXPECT_EQ(stats.shift_reduce, 1);
  EXPECT_EQ(stats.reduce_reduce, 1);
}

TEST(LalrTest, ReductionOnEndInEndStateLosesToAccept) {
  const Grammar g = MakeGrammar("s: x | A; x: s");
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(Build(g, &t, &stats).ok());
  const int32_t end_state = Walk(g, t, {"s"});
  EXPECT_EQ(t.Action(end_state, t.end_terminal), kAcceptAction);
  EXPECT_EQ(stats.shift_reduce, 1);
  EXPECT_NE(ConflictReport(g, t).find("on $END: accept wins over reduce by rule 2 (x: s)"),
            std::string::npos);
}

TEST(LalrTest, MultipleStartSymbols) {
  Grammar g = MakeGrammar("a: X b | Y; b: Z | a");
  g.start = {"a", "b"};
  ParseTables t;
  ASSERT_TRUE(Build(g, &t).ok());
  ASSERT_EQ(t.start_state.size(), 2u);
  EXPECT_NE(t.start_state[0], t.start_state[1]);
  EXPECT_EQ(Names(g, t.AcceptedTerminals(t.start_state[0])), (std::vector<std::string>{"X", "Y"}));
  EXPECT_EQ(Names(g, t.AcceptedTerminals(t.start_state[1])),
            (std::vector<std::string>{"X", "Y", "Z"}));
  // Each start has its own end state.
  EXPECT_EQ(t.Action(t.Goto(t.start_state[0], 0), t.end_terminal), kAcceptAction);
  EXPECT_EQ(t.Action(t.Goto(t.start_state[1], 1), t.end_terminal), kAcceptAction);
}

void ExpectError(const Grammar& g, const std::string& fragment) {
  ParseTables t;
  const Status status = BuildParseTables(g, &t);
  ASSERT_FALSE(status.ok()) << fragment;
  EXPECT_EQ(status.code(), ErrorCode::kGrammarSemantics);
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(LalrTest, GrammarErrors) {
  Grammar empty;
  empty.start = {"start"};
  ExpectError(empty, "grammar has no rules");

  Grammar no_start = MakeGrammar("s: A");
  no_start.start.clear();
  ExpectError(no_start, "no start symbol");

  Grammar bad_start = MakeGrammar("s: A");
  bad_start.start = {"nope"};
  ExpectError(bad_start, "start symbol 'nope' is not a rule");

  Grammar undefined = MakeGrammar("s: A t");
  undefined.nonterminals.push_back("t");
  // Renumber the reference to "t": MakeGrammar took it for a terminal.
  undefined.terminals.pop_back();
  undefined.rules[0].lhs = 1;
  undefined.rules[0].rhs = {0, 2};
  ExpectError(undefined, "rule 's: A t' uses 't', which has no rules");

  Grammar start_without_rules = MakeGrammar("s: A");
  start_without_rules.nonterminals.push_back("u");
  start_without_rules.start = {"u"};
  ExpectError(start_without_rules, "start symbol 'u' has no rules");

  ExpectError(MakeGrammar("s: A; t: B"), "rule 't: B' is unreachable from the start symbol 's'");
  ExpectError(MakeGrammar("s: A | B | A"), "rule 's: A' is defined twice");
}

TEST(LalrTest, TimingsAreRecorded) {
  const Grammar g = MakeGrammar("E: E + T | T; T: T * F | F; F: ( E ) | id");
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(Build(g, &t, &stats).ok());
  EXPECT_GE(stats.lr0_seconds, 0);
  EXPECT_GE(stats.seconds, stats.lr0_seconds);
  EXPECT_GT(stats.nonterminal_transitions, 0);
  EXPECT_GT(stats.lr0_items, stats.lr0_states);
}

// --- Differential tests against Lark's LALR_Analyzer (tests/tools/lark_tables.py).

// Runs the tool with `args`, feeding it `input`; "" when Python is not set up.
std::string RunLarkTables(const std::string& args, const std::string& input) {
  const char* python = std::getenv("CFGMASK_PYTHON");
  if (python == nullptr) return "";
  char input_path[] = "/tmp/cfgmask_lalr_test_XXXXXX";
  const int fd = mkstemp(input_path);
  if (fd < 0) return "";
  FILE* f = fdopen(fd, "w");
  fwrite(input.data(), 1, input.size(), f);
  fclose(f);
  const std::string command = std::string(python) + " " + CFGMASK_SOURCE_DIR +
                              "/tests/tools/lark_tables.py " + args + " < " + input_path;
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  if (pipe != nullptr) {
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    if (pclose(pipe) != 0) output.clear();
  }
  std::remove(input_path);
  return output;
}

std::string ToBnfBlock(const Grammar& g) {
  std::string text = "grammar\nstart";
  for (const std::string& s : g.start) text += " " + s;
  text += "\nterminals";
  for (const TerminalDef& t : g.terminals) text += " " + t.name;
  text += "\n";
  for (const Rule& r : g.rules) {
    text += "rule " + g.SymbolName(r.lhs) + " " + std::to_string(r.priority);
    for (SymbolId s : r.rhs) text += " " + g.SymbolName(s);
    text += "\n";
  }
  return text + "end\n";
}

Grammar FromBnfBlock(const std::string& text) {
  Grammar g;
  std::vector<std::vector<std::string>> rules;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::stringstream words_stream(line);
    std::vector<std::string> words;
    for (std::string w; words_stream >> w;) words.push_back(w);
    if (words.empty()) continue;
    if (words[0] == "start") g.start.assign(words.begin() + 1, words.end());
    if (words[0] == "terminals") {
      for (size_t i = 1; i < words.size(); ++i) {
        TerminalDef t;
        t.name = words[i];
        g.terminals.push_back(t);
      }
    }
    if (words[0] == "rule") {
      rules.push_back(words);
      if (std::find(g.nonterminals.begin(), g.nonterminals.end(), words[1]) == g.nonterminals.end()) {
        g.nonterminals.push_back(words[1]);
      }
    }
  }
  std::map<std::string, SymbolId> id;
  for (int32_t t = 0; t < g.num_terminals(); ++t) id[g.terminals[t].name] = t;
  for (size_t k = 0; k < g.nonterminals.size(); ++k) {
    id[g.nonterminals[k]] = g.num_terminals() + static_cast<SymbolId>(k);
  }
  for (const auto& words : rules) {
    Rule r;
    r.lhs = id.at(words[1]);
    r.priority = std::stoi(words[2]);
    for (size_t i = 3; i < words.size(); ++i) r.rhs.push_back(id.at(words[i]));
    g.rules.push_back(r);
  }
  return g;
}

// One answer of `lark_tables.py --bnf`.
struct LarkAnswer {
  bool error = false;
  int states = 0;
  std::multiset<std::string> rows;
};

std::vector<LarkAnswer> ParseLarkAnswers(const std::string& output) {
  std::vector<LarkAnswer> answers;
  std::stringstream lines(output);
  std::string line;
  int rows_left = 0;
  while (std::getline(lines, line)) {
    if (rows_left > 0) {
      answers.back().rows.insert(line);
      --rows_left;
    } else if (line == "error") {
      answers.push_back({true, 0, {}});
    } else if (line.rfind("states ", 0) == 0) {
      answers.push_back({false, std::stoi(line.substr(7)), {}});
      rows_left = answers.back().states;
    }
  }
  return answers;
}

// Our action rows in the same words; the accept action is left out, as the
// tool leaves out $END in end states.
std::multiset<std::string> OurRows(const Grammar& g, const ParseTables& t) {
  std::multiset<std::string> rows;
  for (int32_t s = 0; s < t.num_states; ++s) {
    std::vector<std::string> words;
    for (int32_t term = 0; term < t.num_terminals; ++term) {
      const int32_t a = t.Action(s, term);
      if (a == 0 || a == kAcceptAction) continue;
      const std::string name = term == t.end_terminal ? "$END" : g.terminals[term].name;
      words.push_back(name + (a > 0 ? ":s" : ":r" + std::to_string(-a - 1)));
    }
    std::sort(words.begin(), words.end());
    std::string row;
    for (const std::string& w : words) row += (row.empty() ? "" : " ") + w;
    rows.insert(row);
  }
  return rows;
}

// Whether our table is Lark's: the same outcome (tables or a reduce/reduce
// error) and, for tables, the same number of states and the same rows.
bool SameAsLark(const Grammar& g, const LarkAnswer& lark, std::string* why) {
  ParseTables t;
  const Status status = BuildParseTables(g, &t);
  if (!status.ok() != lark.error) {
    *why = lark.error ? "Lark rejects it, we do not" : "we reject it: " + status.message();
    return false;
  }
  if (lark.error) return true;
  if (t.num_states != lark.states) {
    *why = std::to_string(t.num_states) + " states, Lark " + std::to_string(lark.states);
    return false;
  }
  if (OurRows(g, t) != lark.rows) {
    *why = "different action rows";
    return false;
  }
  return true;
}

void ExpectSameAsLark(const Grammar& g, const LarkAnswer& lark, const std::string& label) {
  std::string why;
  EXPECT_TRUE(SameAsLark(g, lark, &why)) << label << ": " << why << "\n" << ToBnfBlock(g);
}

// Textbook grammars and 1000 random ones.  Where the reads relation has
// cycles, Lark's table may vary between runs (parser/lalr.cc); there ours has
// to be one of the tables Lark gives in up to 8 runs.
TEST(LarkDifferentialTest, TextbookAndRandomGrammars) {
  std::vector<Grammar> grammars;
  for (const std::string& spec : parser_test::TextbookGrammars()) {
    grammars.push_back(MakeGrammar(spec));
  }
  constexpr int kRandom = 1000;
  for (uint32_t seed = 1; seed <= kRandom; ++seed) grammars.push_back(parser_test::RandomGrammar(seed));
  std::string input;
  for (const Grammar& g : grammars) input += ToBnfBlock(g);
  const std::string output = RunLarkTables("--bnf", input);
  if (output.empty()) GTEST_SKIP() << "Lark not available: source .cache/env.sh (CFGMASK_PYTHON)";
  const std::vector<LarkAnswer> answers = ParseLarkAnswers(output);
  ASSERT_EQ(answers.size(), grammars.size());
  int errors = 0, cyclic = 0, reruns = 0;
  for (size_t i = 0; i < grammars.size(); ++i) {
    const Grammar& g = grammars[i];
    ParseTables t;
    LalrStats stats;
    BuildParseTables(g, &t, &stats).ok();
    errors += answers[i].error;
    std::string why;
    if (stats.reads_cycle_transitions == 0) {
      ExpectSameAsLark(g, answers[i], "grammar " + std::to_string(i));
      continue;
    }
    ++cyclic;
    bool same = SameAsLark(g, answers[i], &why);
    for (int run = 0; run < 8 && !same; ++run) {
      ++reruns;
      const std::vector<LarkAnswer> again = ParseLarkAnswers(RunLarkTables("--bnf", ToBnfBlock(g)));
      same = again.size() == 1 && SameAsLark(g, again[0], &why);
    }
    EXPECT_TRUE(same) << "grammar " << i << " (reads cycles): " << why << "\n" << ToBnfBlock(g);
  }
  std::printf("%zu grammars, %d with reads cycles (%d Lark reruns), %d rejected for "
              "reduce/reduce conflicts\n",
              grammars.size(), cyclic, reruns, errors);
  EXPECT_GT(cyclic, 10);
  EXPECT_GT(errors, 10);
  EXPECT_LT(errors, static_cast<int>(grammars.size()) - 100);
}

// python.lark's BNF as Lark compiles it, given to both analysers: identical
// action rows, rule numbers included.  Needs Lark, not our .lark reader.
TEST(LarkDifferentialTest, PythonBnfFromLark) {
  const char* grammars = std::getenv("CFGMASK_LARK_GRAMMARS");
  if (grammars == nullptr) GTEST_SKIP() << "CFGMASK_LARK_GRAMMARS not set (source .cache/env.sh)";
  const std::string bnf =
      RunLarkTables("--rules " + std::string(grammars) + "/python.lark file_input", "");
  if (bnf.empty()) GTEST_SKIP() << "Lark not available (CFGMASK_PYTHON)";
  const Grammar g = FromBnfBlock(bnf);
  const std::vector<LarkAnswer> answers = ParseLarkAnswers(RunLarkTables("--bnf", bnf));
  ASSERT_EQ(answers.size(), 1u);
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(BuildParseTables(g, &t, &stats).ok());
  std::printf("python.lark BNF: %d terminals, %zu rules, %d states, %d items, "
              "%d nonterminal transitions, %d s/r; lr0 %.2f ms, lookaheads %.2f ms, "
              "tables %.2f ms\n",
              g.num_terminals(), g.rules.size(), t.num_states, stats.lr0_items,
              stats.nonterminal_transitions, stats.shift_reduce, 1e3 * stats.lr0_seconds,
              1e3 * stats.lookahead_seconds, 1e3 * stats.table_seconds);
  EXPECT_EQ(t.num_states, 796);
  EXPECT_EQ(stats.reads_cycle_transitions, 0);
  ExpectSameAsLark(g, answers[0], "python.lark");
}

// python.lark (start file_input) against Lark 1.3.1's own LALR table: the same
// number of states and the same multiset of AcceptedTerminals sets.
TEST(LalrTest, PythonGrammarMatchesLark) {
#if !CFGMASK_HAVE_LARK_READER
  GTEST_SKIP() << "grammar/lark_reader.cc is not there yet: python.lark comparison skipped";
#else
  const char* grammars = std::getenv("CFGMASK_LARK_GRAMMARS");
  const char* python = std::getenv("CFGMASK_PYTHON");
  if (grammars == nullptr || python == nullptr) {
    GTEST_SKIP() << "CFGMASK_LARK_GRAMMARS / CFGMASK_PYTHON not set (source .cache/env.sh)";
  }
  const std::string path = std::string(grammars) + "/python.lark";
  LarkReaderOptions options;
  options.start = {"file_input"};
  Grammar g;
  const Status read = ReadLarkFile(path, options, &g);
  if (!read.ok()) GTEST_SKIP() << "the .lark reader cannot read python.lark yet: " << read.message();

  ParseTables t;
  LalrStats stats;
  const Status built = BuildParseTables(g, &t, &stats);
  ASSERT_TRUE(built.ok()) << built.message();
  std::printf("python.lark: %d states, %d items, %d nonterminal transitions, %d s/r; "
              "lr0 %.2f ms, lookaheads %.2f ms, tables %.2f ms\n",
              t.num_states, stats.lr0_items, stats.nonterminal_transitions, stats.shift_reduce,
              1e3 * stats.lr0_seconds, 1e3 * stats.lookahead_seconds, 1e3 * stats.table_seconds);

  const std::string command = std::string(python) + " " + CFGMASK_SOURCE_DIR +
                              "/tests/tools/lark_tables.py " + path + " file_input";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << output;

  std::stringstream lines(output);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  ASSERT_EQ(line.rfind("states ", 0), 0u) << line;
  const int lark_states = std::stoi(line.substr(7));
  EXPECT_EQ(t.num_states, lark_states);
  std::map<std::string, int> lark_sets, our_sets;
  while (std::getline(lines, line)) ++lark_sets[line];
  for (int32_t s = 0; s < t.num_states; ++s) {
    std::string joined;
    for (const std::string& name : Names(g, t.AcceptedTerminals(s))) {
      joined += (joined.empty() ? "" : " ") + name;
    }
    ++our_sets[joined];
  }
  EXPECT_EQ(our_sets.size(), lark_sets.size());
  for (const auto& [set, count] : lark_sets) {
    auto it = our_sets.find(set);
    EXPECT_EQ(it == our_sets.end() ? 0 : it->second, count) << "terminal set: " << set;
  }
  for (const auto& [set, count] : our_sets) {
    EXPECT_TRUE(lark_sets.count(set)) << "set not in Lark's table: " << set;
  }
#endif
}

}  // namespace
}  // namespace cfgmask
