// The compile driver (runtime/compile/compile.cc) and its phases:
// progress reports name the phases in pipeline order, the walk fraction
// never decreases and ends at 1, the seconds never decrease; an exception
// thrown by the progress callback unwinds the compile and leaves no store;
// the statistics report (runtime/tools/report.h) renders the same figures as text
// and JSON; a store the compile makes (std::unique_ptr) is the store it
// builds into the caller's, and none after an error; --eos is applied in the
// tokenizer phase, after the grammar is read.
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
