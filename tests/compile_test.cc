// The compile driver (runtime/compile/compile.cc) and its phases:
// progress reports name the phases in pipeline order, the walk fraction
// never decreases and ends at 1, the seconds never decrease; an exception
// thrown by the progress callback unwinds the compile and leaves no store;
// the statistics report (runtime/tools/report.h) renders the same figures as text
// and JSON; a store the compile makes (std::unique_ptr) is the store it
// builds into the caller's, and none after an error; --eos is applied in the
// tokenizer phase, after the grammar is read; the terminal successors,
// computed beside the other phases with more than one thread, give the store
// of the serial compile, and every error is the serial compile's.
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "maskstore/compiled_store.h"
#include "runtime/compile/compile.h"
#include "runtime/tools/report.h"
#include "tests/small_tokenizer.h"

namespace cfgmask {
namespace {

const char kGrammar[] = R"(start: x+
x: AB | A B | A
A: "a"
B: "b"
AB: "ab"
%ignore " "
)";

Status CompileSmall(const CompileOptions& options, bool streamline, CompiledStore* s) {
  WriteTextFile(TempPath("g.lark"), kGrammar);
  WriteTextFile(TempPath("tok.json"), SmallTokenizerJson());
  return CompileGrammar(TempPath("g.lark"), TempPath("tok.json"), options, streamline, s);
}

TEST(CompileProgress, PhasesInOrderAndFractionMonotone) {
  for (bool streamline : {true, false}) {
    std::vector<CompileProgress> seen;
    CompileOptions options;
    options.progress = [&](const CompileProgress& p) { seen.push_back(p); };
    CompiledStore s;
    ASSERT_TRUE(CompileSmall(options, streamline, &s).ok());
    std::vector<std::string> phases;
    for (const CompileProgress& p : seen) {
      if (phases.empty() || phases.back() != p.phase) phases.push_back(p.phase);
    }
    std::vector<std::string> want = {"grammar", "lalr", "automaton", "tokenizer", "walk", "store"};
    if (streamline) want.push_back("streamline");
    EXPECT_EQ(phases, want);
    for (size_t i = 1; i < seen.size(); ++i) {
      EXPECT_GE(seen[i].walk_fraction, seen[i - 1].walk_fraction) << i;
      EXPECT_GE(seen[i].seconds, seen[i - 1].seconds) << i;
    }
    EXPECT_EQ(seen.front().walk_fraction, 0.0);
    EXPECT_EQ(seen.back().walk_fraction, 1.0);
  }
}

TEST(CompileProgress, ThrowingCallbackLeavesNoStore) {
  for (const char* at : {"grammar", "walk", "store", "streamline"}) {
    CompileOptions options;
    options.progress = [&](const CompileProgress& p) {
      if (p.phase == at) throw std::runtime_error(p.phase);
    };
    CompiledStore s;
    EXPECT_THROW(CompileSmall(options, true, &s), std::runtime_error) << at;
    EXPECT_EQ(s.vocab_size, 0) << at;
    EXPECT_TRUE(s.row_seq.empty()) << at;
  }
}

TEST(CompileGrammar, MadeStoreEqualsCallersStore) {
  WriteTextFile(TempPath("g.lark"), kGrammar);
  WriteTextFile(TempPath("tok.json"), SmallTokenizerJson());
  for (const char* eos : {"", "<|endoftext|>"}) {
    CompiledStore into;
    ASSERT_TRUE(CompileGrammar(TempPath("g.lark"), TempPath("tok.json"), CompileOptions(), true,
                               &into, eos)
                    .ok());
    std::unique_ptr<CompiledStore> made;
    ASSERT_TRUE(CompileGrammar(TempPath("g.lark"), TempPath("tok.json"), CompileOptions(), true,
                               &made, eos)
                    .ok());
    ASSERT_NE(made, nullptr);
    CompiledStore a = into, b = *made;
    a.stats = b.stats = CompiledStore::Stats();  // timings
    EXPECT_EQ(StoreReportJson(MakeStoreReport(a, "", 0)), StoreReportJson(MakeStoreReport(b, "", 0)));
    EXPECT_EQ(a.row_tokens.ToVector(), b.row_tokens.ToVector()) << eos;
    EXPECT_EQ(a.eos_ids.ToVector(), b.eos_ids.ToVector()) << eos;
  }
  // An error leaves no store; a bad grammar is reported before a bad --eos.
  WriteTextFile(TempPath("bad.lark"), "start: UNDEFINED\n");
  std::unique_ptr<CompiledStore> made;
  Status st = CompileGrammar(TempPath("bad.lark"), TempPath("tok.json"), CompileOptions(), true,
                             &made, "no such token");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bad.lark"), std::string::npos) << st.message();
  EXPECT_EQ(made, nullptr);
  st = CompileGrammar(TempPath("g.lark"), TempPath("tok.json"), CompileOptions(), true, &made,
                      "no such token");
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("eos: no token"), std::string::npos) << st.message();
  EXPECT_EQ(made, nullptr);
}

// The bytes of `s` as a store file, its timings left out.
std::string StoreBytes(CompiledStore s) {
  s.stats.seconds_grammar = s.stats.seconds_lalr = s.stats.seconds_automaton = 0;
  s.stats.seconds_store = s.stats.seconds_tokenizer = s.stats.seconds_streamline = 0;
  const std::string path = TempPath("bytes.cfgm");
  EXPECT_TRUE(WriteCompiledStore(s, path).ok());
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(CompileGrammar, SuccessorsBesideTheWalkGiveTheSerialStoreAndErrors) {
  WriteTextFile(TempPath("tok.json"), SmallTokenizerJson());
  // NAME NAME without a separator: NAME's successors are checked (not
  // `any`), so the tables filled after the walk carry something.
  WriteTextFile(TempPath("names.lark"), "start: (NAME | NUMBER)+\nNAME: /[a-z]+/\n"
                                        "NUMBER: /[0-9]+/\n");
  WriteTextFile(TempPath("g.lark"), kGrammar);
  for (const char* g : {"names.lark", "g.lark"}) {
    for (bool streamline : {true, false}) {
      std::string serial;
      for (int threads : {1, 2, 0}) {
        CompileOptions options;
        options.num_threads = threads;
        CompiledStore s;
        ASSERT_TRUE(
            CompileGrammar(TempPath(g), TempPath("tok.json"), options, streamline, &s).ok());
        if (std::string(g) == "names.lark") {
          EXPECT_FALSE(s.terminal_next_data.empty()) << g;
          EXPECT_GT(s.terminal_min_bytes.size(), 0u) << g;
        }
        const std::string bytes = StoreBytes(s);
        if (threads == 1) serial = bytes;
        EXPECT_TRUE(bytes == serial) << g << " threads " << threads << " streamline " << streamline;
      }
    }
  }
  // Errors: a grammar's (the LALR tables, the automaton) before the
  // tokenizer's, the tokenizer's, the walk's; the same Status and no store
  // with 1 or 2 threads.
  WriteTextFile(TempPath("conflict.lark"), "start: a | b\na: \"x\"\nb: \"x\"\n");
  WriteTextFile(TempPath("empty.lark"), "start: E\nE: /a*/\n");
  struct Case {
    const char* grammar;
    const char* tokenizer;
    int32_t max_roots;
    const char* want;  // in the message
  };
  for (const Case& c : {Case{"conflict.lark", "missing.json", 1000000, "reduce/reduce conflict"},
                        Case{"empty.lark", "missing.json", 1000000, "matches the empty string"},
                        Case{"names.lark", "missing.json", 1000000, "missing.json: cannot open"},
                        Case{"names.lark", "tok.json", 1, "(max_roots, --max-roots)"}}) {
    std::string serial;
    for (int threads : {1, 2}) {
      CompileOptions options;
      options.num_threads = threads;
      options.max_roots = c.max_roots;
      std::unique_ptr<CompiledStore> made;
      Status st = CompileGrammar(TempPath(c.grammar), TempPath(c.tokenizer), options, true, &made);
      EXPECT_FALSE(st.ok()) << c.grammar;
      EXPECT_EQ(made, nullptr) << c.grammar;
      CompiledStore into;
      Status st2 = CompileStore(TempPath(c.grammar), TempPath(c.tokenizer), options, &into);
      EXPECT_EQ(st2.message(), st.message()) << c.grammar;
      EXPECT_TRUE(into.row_seq.empty()) << c.grammar;
      const std::string said = std::to_string(static_cast<int>(st.code())) + " " + st.message();
      if (threads == 1) serial = said;
      EXPECT_EQ(said, serial) << c.grammar << " threads " << threads;
    }
    EXPECT_NE(serial.find(c.want), std::string::npos) << serial;
  }
}

TEST(StoreReport, TextAndJsonCarryTheSameFigures) {
  CompiledStore s;
  ASSERT_TRUE(CompileSmall(CompileOptions(), true, &s).ok());
  const StoreReport r = MakeStoreReport(s, "g.cfgm", 1234);
  EXPECT_EQ(r.rows, static_cast<int64_t>(s.row_seq.size()));
  EXPECT_EQ(r.rows_list + r.rows_complement + r.rows_bitset, r.rows);
  const nlohmann::json j = nlohmann::json::parse(StoreReportJson(r));
  EXPECT_EQ(j["file"], "g.cfgm");
  EXPECT_EQ(j["file_bytes"], 1234);
  EXPECT_EQ(j["rows"], r.rows);
  EXPECT_EQ(j["lalr_states"], r.lalr_states);
  EXPECT_EQ(j["tokenizer"]["vocab_size"], s.vocab_size);
  EXPECT_EQ(j["streamlining"]["applied"], true);
  EXPECT_EQ(j["streamlining"]["steps"].size(), 3u);
  EXPECT_EQ(j["streamlining"]["steps"][2]["rows"], r.rows);
  EXPECT_TRUE(j["seconds"].contains("total"));
  const std::string text = StoreReportText(r);
  EXPECT_NE(text.find("g.cfgm: grammar g.lark"), std::string::npos) << text;
  EXPECT_NE(text.find("LALR states      " + std::to_string(r.lalr_states) + "\n"),
            std::string::npos)
      << text;
}

TEST(BenchReport, JsonKeysAndPercentiles) {
  BenchReport b;
  b.files = 2;
  b.segment = "greedy";
  b.mask_us = {1, 2, 3, 4, 100};
  const nlohmann::json j = nlohmann::json::parse(BenchReportJson(b));
  EXPECT_EQ(j["steps"], 5);
  EXPECT_EQ(j["mask_us"]["p50"], 3.0);
  EXPECT_EQ(j["mask_us"]["max"], 100.0);
  EXPECT_EQ(j["memo"]["steps_without_miss"], 0);
  EXPECT_NE(BenchReportText(b).find("2 files, 5 steps (greedy segmentation)"), std::string::npos);
}

}  // namespace
}  // namespace cfgmask
