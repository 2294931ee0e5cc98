// Tokens checked by simulation (CompiledStore::sim_token): a token whose
// lexing from some root branches into more hypotheses than
// CompileOptions::max_walk_hypotheses gets no rows under that root, and the
// runtime simulates it instead.  Checked here:
//  - a grammar where "=" and "==" (and "<", "<<") are both terminals of one
//    scanner, so a run of n "=" has Fibonacci(n) lexings: the compile stays
//    small, the long runs are simulated, and every step's mask equals the
//    per-token slow reference (Session::AllowsSlow) and the mask of a store
//    compiled with no simulation at all;
//  - python.lark with every branching token simulated (limit 1) gives the
//    same masks as with the default limit, on random masked walks;
//  - the simulated tokens survive the merge pass and a store-file round trip.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"
#include "runtime/session.h"
#include "streamline/streamline.h"
#include "tests/exactness_harness.h"
#include "tests/small_tokenizer.h"

namespace cfgmask {
namespace {

// Arguments may hold any run of the operator tokens; "let" binds one name.
constexpr char kRunsGrammar[] = R"lark(
start: stmt+
stmt: "let" NAME "=" expr ";"
    | "args" "(" arg* ")" ";"
arg: "=" | "==" | "<" | "<<" | NAME
expr: NAME | expr "==" NAME | expr "<<" NAME
NAME: /[a-z]+/
%ignore " "
)lark";

// Printable ASCII, space, then runs of "=" and "<" up to `max_run` bytes
// (alone and after a space), and a few words.
std::string RunsTokenizerJson(int max_run) {
  std::vector<std::string> tokens;
  for (int c = 33; c < 127; ++c) tokens.push_back(std::string(1, static_cast<char>(c)));
  tokens.push_back("\xC4\xA0");  // GPT-2's byte map: space -> U+0120
  for (int n = 2; n <= max_run; ++n) {
    tokens.push_back(std::string(n, '='));
    tokens.push_back("\xC4\xA0" + std::string(n, '='));
    if (n % 3 == 0) tokens.push_back(std::string(n, '<'));
  }
  for (const char* w : {"let", "args", "ab", "\xC4\xA0x", "=x", "==x", "(=", "=)"}) tokens.push_back(w);
  return ByteLevelTokenizerJson(tokens);
}

std::unique_ptr<CompiledStore> Compile(const std::string& grammar, const std::string& tokenizer,
                                       const std::string& start, int32_t max_hypotheses) {
  CompileOptions o;
  o.start = start;
  o.max_walk_hypotheses = max_hypotheses;
  auto s = std::make_unique<CompiledStore>();
  Status st = CompileStore(grammar, tokenizer, o, s.get());
  EXPECT_TRUE(st.ok()) << st.message();
  return st.ok() ? std::move(s) : nullptr;
}

// Random masked walks through `a`; at each step the masks of a and b are
// equal, and (when `slow`) equal to AllowsSlow on every token.
int64_t CompareWalks(const CompiledStore* a, const CompiledStore* b, bool slow, int walks,
                     int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  int64_t compared = 0;
  for (int w = 0; w < walks; ++w) {
    Session sa(a), sb(b);
    for (int i = 0; i < steps; ++i) {
      const std::vector<uint32_t> ma = sa.Mask();
      EXPECT_EQ(ma, sb.Mask()) << "walk " << w << " after " << JsonQuote(sa.text());
      if (::testing::Test::HasFailure()) return compared;
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < a->vocab_size; ++t) {
        const bool fast = (ma[t >> 5] >> (t & 31)) & 1;
        if (slow) {
          EXPECT_EQ(fast, sa.AllowsSlow(t)) << "after " << JsonQuote(sa.text()) << ": token "
                                            << JsonQuote(std::string(a->TokenBytes(t)));
        }
        if (fast && !a->token_special[t]) allowed.push_back(t);
      }
      if (::testing::Test::HasFailure()) return compared;
      ++compared;
      EXPECT_TRUE(!allowed.empty() || sa.CanEnd()) << "dead end after " << JsonQuote(sa.text());
      if (allowed.empty()) break;
      // Favour the long runs, the tokens this test is about.
      int32_t t = allowed[rng() % allowed.size()];
      for (int k = 0; k < 3 && a->TokenBytes(t).size() < 4; ++k) t = allowed[rng() % allowed.size()];
      EXPECT_TRUE(sa.Advance(t).ok());
      EXPECT_TRUE(sb.Advance(t).ok());
    }
  }
  return compared;
}

TEST(SimulatedTokens, OperatorRunsAreSimulatedAndExact) {
  const std::string grammar = TempPath("runs.lark"), tok = TempPath("runs_tokenizer.json"),
                    small_tok = TempPath("runs_small_tokenizer.json");
  WriteTextFile(grammar, kRunsGrammar);
  // Runs of 40 bytes: 165,580,141 lexings each without simulation.
  WriteTextFile(tok, RunsTokenizerJson(40));
  auto sim = Compile(grammar, tok, "start", 128);
  ASSERT_TRUE(sim);
  // Under the sanitizer 8 walks against the slow path instead of 25 (every
  // step reads every token both ways; the optimised build takes all 25).
  const int walks = TestSanitized() ? 8 : 25, least = TestSanitized() ? 80 : 250;
  EXPECT_GT(sim->sim_token.size(), 0u);
  EXPECT_EQ(sim->stats.simulated_pairs, static_cast<int64_t>(sim->sim_token.size()));
  // Every simulated token is a long run (short ones have rows).
  for (int32_t t : sim->sim_token) EXPECT_GE(sim->TokenBytes(t).size(), 8u);
  EXPECT_GT(CompareWalks(sim.get(), sim.get(), /*slow=*/true, walks, 30, 7), least);

  // Runs of at most 16 bytes compile without simulation too: same masks.
  WriteTextFile(small_tok, RunsTokenizerJson(16));
  auto plain = Compile(grammar, small_tok, "start", 1 << 30);
  auto sim_small = Compile(grammar, small_tok, "start", 8);
  ASSERT_TRUE(plain && sim_small);
  EXPECT_EQ(plain->sim_token.size(), 0u);
  EXPECT_GT(sim_small->sim_token.size(), 0u);
  EXPECT_LT(sim_small->row_seq.size(), plain->row_seq.size());
  EXPECT_GT(CompareWalks(plain.get(), sim_small.get(), /*slow=*/true, walks, 30, 11), least);

  // A text made of long runs is accepted and rejected as by the slow path.
  for (const std::string text : {"args(" + std::string(37, '=') + " x);",
                                 "let x = a" + std::string(30, '=') + ";", std::string("args(<<<<<<<<<);")}) {
    Session s(sim.get());
    const bool ok = s.AdvanceBytes(text).ok() && s.CanEnd();
    Session r(plain.get());
    EXPECT_EQ(ok, r.AdvanceBytes(text).ok() && r.CanEnd()) << text;
  }
}

TEST(SimulatedTokens, SurviveStreamliningAndRoundTrip) {
  const std::string grammar = TempPath("runs2.lark"), tok = TempPath("runs2_tokenizer.json");
  WriteTextFile(grammar, kRunsGrammar);
  WriteTextFile(tok, RunsTokenizerJson(32));
  auto sim = Compile(grammar, tok, "start", 64);
  ASSERT_TRUE(sim);
  ASSERT_GT(sim->sim_token.size(), 0u);
  CompiledStore streamlined = *sim;
  ASSERT_TRUE(StreamlineStore(&streamlined, StreamlineOptions{}, nullptr).ok());
  EXPECT_EQ(streamlined.sim_token, sim->sim_token);
  const std::string path = TempPath("runs2.cfgm");
  ASSERT_TRUE(WriteStoreFile(streamlined, path).ok());
  CompiledStore back;
  Status st = ReadStoreFile(path, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.sim_token, streamlined.sim_token);
  EXPECT_EQ(back.sim_row, streamlined.sim_row);
  EXPECT_GT(CompareWalks(sim.get(), &back, /*slow=*/false, 30, 30, 5), 300);
}

TEST(SimulatedTokens, PythonWithEveryBranchingTokenSimulated) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  const std::string grammar = TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark";
  const std::string tok = TempPath("small_tokenizer.json");
  WriteTextFile(tok, SmallTokenizerJson());
  auto plain = Compile(grammar, tok, "file_input", 128);
  auto sim = Compile(grammar, tok, "file_input", 1);
  ASSERT_TRUE(plain && sim);
  EXPECT_GT(sim->sim_token.size(), 100u);
  EXPECT_GT(CompareWalks(plain.get(), sim.get(), /*slow=*/false, TestQuick() ? 12 : 60, 60, 3),
            300);
}

}  // namespace
}  // namespace cfgmask
