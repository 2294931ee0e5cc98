// Benchmarks of the parser phases on python.lark (Google Benchmark):
//   BM_LoadPythonLarkAndBuildTables  ReadLarkFile + BuildParseTables.
//   BM_Accepts/d                     IncrementalParser::Accepts at every
//                                    position of real terminal streams, asked
//                                    for the next d terminals of the stream
//                                    (the first is accepted, the others mostly
//                                    not); items = Accepts calls.
// The streams are Lark's own, for ~50 CPython stdlib files, from
// tests/tools/lark_terminal_streams.py.  Needs CFGMASK_PYTHON and
// CFGMASK_LARK_GRAMMARS (source .cache/env.sh).  Correctness is tested by
// parser_differential_test.cc.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/lark_reader.h"
#include "parser/incremental_parser.h"
#include "parser/lalr.h"

namespace cfgmask {
namespace {

constexpr int kStreamFiles = 50;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string PythonLarkPath() {
  const std::string grammars = Env("CFGMASK_LARK_GRAMMARS");
  return grammars.empty() ? "" : grammars + "/python.lark";
}

Status LoadPythonLark(Grammar* grammar, ParseTables* tables) {
  LarkReaderOptions options;
  options.start = {"file_input"};
  Status status = ReadLarkFile(PythonLarkPath(), options, grammar);
  if (!status.ok()) return status;
  return BuildParseTables(*grammar, tables);
}

// python.lark's tables and, for every position of every stream, the parser
// configuration there and the terminals that follow it.
struct StreamFixture {
  Grammar grammar;
  ParseTables tables;
  std::vector<IncrementalParser> configurations;
  std::vector<std::vector<int32_t>> next_terminals;  // up to 3 per configuration
  std::string error;
};

const StreamFixture& Fixture() {
  static const StreamFixture* fixture = [] {
    auto* f = new StreamFixture;
    if (Env("CFGMASK_PYTHON").empty() || PythonLarkPath().empty()) {
      f->error = "CFGMASK_PYTHON / CFGMASK_LARK_GRAMMARS not set (source .cache/env.sh)";
      return f;
    }
    const Status status = LoadPythonLark(&f->grammar, &f->tables);
    if (!status.ok()) {
      f->error = status.message();
      return f;
    }
    std::unordered_map<std::string, int32_t> terminal_id;
    for (int32_t t = 0; t < f->grammar.num_terminals(); ++t) {
      terminal_id[f->grammar.terminals[t].name] = t;
    }
    const std::string command = "'" + Env("CFGMASK_PYTHON") + "' '" CFGMASK_SOURCE_DIR
                                "/tests/tools/lark_terminal_streams.py' '" +
                                Env("CFGMASK_LARK_GRAMMARS") + "' " +
                                std::to_string(kStreamFiles) + " 0";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
    if (pipe == nullptr) {
      f->error = "cannot run " + command;
      return f;
    }
    std::string output;
    char buffer[1 << 16];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe.get())) > 0) output.append(buffer, n);
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string kind, path;
      int index = 0, accepted = 0;
      size_t count = 0;
      fields >> kind >> index >> accepted >> path >> count;
      if (kind != "F" || !accepted) continue;
      std::vector<int32_t> stream;
      std::string name;
      while (fields >> name) {
        const auto it = terminal_id.find(name);
        if (it == terminal_id.end()) break;
        stream.push_back(it->second);
      }
      IncrementalParser parser(&f->tables);
      for (size_t i = 0; i < stream.size(); ++i) {
        f->configurations.push_back(parser);
        f->next_terminals.emplace_back(stream.begin() + static_cast<std::ptrdiff_t>(i),
                                       stream.begin() + static_cast<std::ptrdiff_t>(
                                                            std::min(i + 3, stream.size())));
        if (!parser.Consume(stream[i])) break;
      }
    }
    if (f->configurations.empty()) f->error = "no terminal streams from " + command;
    return f;
  }();
  return *fixture;
}

void BM_LoadPythonLarkAndBuildTables(benchmark::State& state) {
  if (PythonLarkPath().empty()) {
    state.SkipWithError("CFGMASK_LARK_GRAMMARS not set (source .cache/env.sh)");
    return;
  }
  for (auto _ : state) {
    Grammar grammar;
    ParseTables tables;
    const Status status = LoadPythonLark(&grammar, &tables);
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
    benchmark::DoNotOptimize(tables.action.data());
  }
}
BENCHMARK(BM_LoadPythonLarkAndBuildTables)->Unit(benchmark::kMillisecond);

void BM_Accepts(benchmark::State& state) {
  const StreamFixture& f = Fixture();
  if (!f.error.empty()) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  const size_t depth = static_cast<size_t>(state.range(0));
  int64_t calls = 0;
  for (auto _ : state) {
    int64_t accepted = 0;
    for (size_t i = 0; i < f.configurations.size(); ++i) {
      const IncrementalParser& parser = f.configurations[i];
      const std::vector<int32_t>& next = f.next_terminals[i];
      const size_t asked = std::min(depth, next.size());
      for (size_t j = 0; j < asked; ++j) accepted += parser.Accepts(next[j]);
      calls += static_cast<int64_t>(asked);
    }
    benchmark::DoNotOptimize(accepted);
  }
  state.SetItemsProcessed(calls);
  state.counters["configurations"] = static_cast<double>(f.configurations.size());
}
BENCHMARK(BM_Accepts)->DenseRange(1, 3)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace
}  // namespace cfgmask

BENCHMARK_MAIN();
