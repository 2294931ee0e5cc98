// IncrementalParser over python.lark against Lark itself, on real input.
//
// tests/tools/lark_terminal_streams.py lexes CPython stdlib files with Lark
// (contextual lexer + PythonIndenter) and prints the terminal stream its
// LALR parser consumed, then mutates each accepted stream (delete, duplicate,
// swap adjacent; fixed seed) and prints Lark's verdict on each mutation: the
// longest prefix its interactive parser accepts and whether $END is accepted
// after it.  Our parser, built from the same .lark file by ReadLarkFile and
// BuildParseTables, must consume every accepted stream and then $END, and
// must give the same two answers on every mutated stream.
//
// Size: CFGMASK_QUICK=1 takes 150 files evenly spread over the sorted stdlib
// and 5 mutations each; otherwise every file and 4 mutations each.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/lark_reader.h"
#include "gtest/gtest.h"
#include "parser/incremental_parser.h"
#include "parser/lalr.h"
#include "tests/oracle_text.h"

namespace cfgmask {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}


// Applies an "M" line's mutation the way lark_terminal_streams.py does.
std::vector<int32_t> Mutate(const std::vector<int32_t>& stream, char op, size_t pos) {
  std::vector<int32_t> out = stream;
  if (op == 'D') {
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(pos));
  } else if (op == 'U') {
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(pos) + 1, stream[pos]);
  } else {
    std::swap(out[pos], out[pos + 1]);
  }
  return out;
}

// Our answers on a terminal stream: the longest prefix consumed, and whether
// $END is accepted after it.  Accepts must agree with Consume at every step.
std::pair<size_t, bool> Verdict(const ParseTables& tables, const std::vector<int32_t>& stream,
                                bool* accepts_agrees) {
  IncrementalParser parser(&tables);
  *accepts_agrees = true;
  size_t consumed = 0;
  for (int32_t terminal : stream) {
    const bool accepts = parser.Accepts(terminal);
    const bool shifted = parser.Consume(terminal);
    if (accepts != shifted) *accepts_agrees = false;
    if (!shifted) break;
    ++consumed;
  }
  return {consumed, parser.AcceptsEnd()};
}

TEST(ParserDifferentialTest, StdlibStreamsAgreeWithLark) {
  const std::string python = Env("CFGMASK_PYTHON");
  const std::string grammars = Env("CFGMASK_LARK_GRAMMARS");
  if (python.empty() || grammars.empty()) {
    if (Env("CI") == "true") FAIL() << "CFGMASK_PYTHON / CFGMASK_LARK_GRAMMARS not set";
    GTEST_SKIP() << "CFGMASK_PYTHON / CFGMASK_LARK_GRAMMARS not set (source .cache/env.sh)";
  }
  const bool quick = Env("CFGMASK_QUICK") == "1";
  const int files_wanted = quick ? 150 : 0;  // 0: every file
  const int mutations_per_file = quick ? 5 : 4;

  LarkReaderOptions options;
  options.start = {"file_input"};
  Grammar grammar;
  const Status read = ReadLarkFile(grammars + "/python.lark", options, &grammar);
  ASSERT_TRUE(read.ok()) << read.message();
  ParseTables tables;
  ASSERT_TRUE(BuildParseTables(grammar, &tables).ok());
  std::unordered_map<std::string, int32_t> terminal_id;
  for (int32_t t = 0; t < grammar.num_terminals(); ++t) terminal_id[grammar.terminals[t].name] = t;

  const std::string command =
      ShellQuote(python) + " " +
      ShellQuote(std::string(CFGMASK_SOURCE_DIR) + "/tests/tools/lark_terminal_streams.py") + " " +
      ShellQuote(grammars) + " " + std::to_string(files_wanted) + " " +
      std::to_string(mutations_per_file);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  ASSERT_NE(pipe, nullptr) << command;

  // The output is streamed: each file's M lines follow its F line, so only
  // the current stream is kept.
  int files = 0, accepted_files = 0, mutations = 0, mutations_full = 0, mutations_end = 0;
  int failures = 0;
  constexpr int kMaxFailures = 20;
  std::string path;
  int stream_index = -1;
  std::vector<int32_t> stream;
  char* raw = nullptr;
  size_t raw_capacity = 0;
  ssize_t length;
  while ((length = getline(&raw, &raw_capacity, pipe.get())) > 0 && failures < kMaxFailures) {
    std::istringstream line(std::string(raw, static_cast<size_t>(length)));
    char kind = 0;
    line >> kind;
    if (kind == 'F') {
      int index = 0, accepted = 0;
      size_t count = 0;
      line >> index >> accepted >> path >> count;
      ++files;
      stream.clear();
      stream_index = -1;
      if (!accepted) continue;
      ++accepted_files;
      bool known = true;
      for (size_t i = 0; i < count; ++i) {
        std::string name;
        line >> name;
        const auto it = terminal_id.find(name);
        if (it == terminal_id.end()) {
          ADD_FAILURE() << path << ": Lark terminal " << name << " is not in our grammar";
          ++failures;
          known = false;
          break;
        }
        stream.push_back(it->second);
      }
      if (!known) continue;
      ASSERT_EQ(stream.size(), count) << path << ": truncated line";
      stream_index = index;
      bool accepts_agrees = false;
      const auto [consumed, end] = Verdict(tables, stream, &accepts_agrees);
      if (consumed != stream.size() || !end || !accepts_agrees) {
        ADD_FAILURE() << path << ": Lark parses it; we consume " << consumed << " of "
                      << stream.size() << " terminals (next: "
                      << (consumed < stream.size() ? grammar.terminals[stream[consumed]].name
                                                   : "$END")
                      << "), $END accepted " << end << ", Accepts agrees with Consume "
                      << accepts_agrees;
        ++failures;
      }
    } else if (kind == 'M') {
      int index = 0, lark_end = 0;
      char op = 0;
      size_t pos = 0, lark_prefix = 0;
      line >> index >> op >> pos >> lark_prefix >> lark_end;
      if (index != stream_index) continue;  // its stream was not usable
      ASSERT_TRUE(op == 'D' || op == 'U' || op == 'S') << "bad mutation line: " << raw;
      ASSERT_LT(pos + (op == 'S' ? 1 : 0), stream.size()) << "bad mutation line: " << raw;
      const std::vector<int32_t> mutated = Mutate(stream, op, pos);
      ++mutations;
      if (lark_prefix == mutated.size()) ++mutations_full;
      if (lark_end) ++mutations_end;
      bool accepts_agrees = false;
      const auto [consumed, end] = Verdict(tables, mutated, &accepts_agrees);
      if (consumed != lark_prefix || end != (lark_end != 0) || !accepts_agrees) {
        ADD_FAILURE() << path << ", mutation " << op << " at " << pos << " ("
                      << grammar.terminals[stream[pos]].name << "): longest prefix Lark "
                      << lark_prefix << " / ours " << consumed << ", $END after it Lark "
                      << lark_end << " / ours " << end << ", Accepts agrees with Consume "
                      << accepts_agrees;
        ++failures;
      }
    }
  }
  free(raw);
  const int status = pclose(pipe.release());
  if (failures < kMaxFailures) {
    EXPECT_EQ(status, 0) << command;
  }

  EXPECT_GT(accepted_files, files / 2) << "Lark rejected most files: is the oracle broken?";
  EXPECT_GT(mutations, 0);
  RecordProperty("files", files);
  RecordProperty("accepted_files", accepted_files);
  RecordProperty("mutations", mutations);
  std::printf(
      "parser differential: %d stdlib files, %d accepted by Lark; %d mutations "
      "(%d still fully accepted, %d accept $END after the longest prefix)\n",
      files, accepted_files, mutations, mutations_full, mutations_end);
}

}  // namespace
}  // namespace cfgmask
