// `cfgmask reduction`: see reduction.h.
#include "runtime/tools/reduction.h"

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "maskstore/row_codec.h"
#include "runtime/tools/sample.h"
#include "runtime/compile/compile.h"
#include "runtime/tools/report.h"
#include "runtime/segment.h"
#include "runtime/session.h"

namespace cfgmask {
namespace {


double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

// The terminals a row group's lexer state is inside of: "terminal start" at a
// boundary, else the candidate terminals of its Tail item.
std::string StateClass(const CompiledStore& s, int32_t q) {
  if (s.at_start[q] || s.tail_item[q] < 0) return "terminal start";
  const int32_t item = s.tail_item[q];
  const int32_t set = s.item_blockers[item];
  std::string out = "inside ";
  int32_t n = 0;
  for (int32_t i = s.set_offsets[set]; i < s.set_offsets[set + 1]; ++i) {
    if (n++ == 3) {
      out += "|...";
      break;
    }
    if (n > 1) out += "|";
    out += s.terminal_names[s.set_data[i]];
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> Sorted(const std::map<std::string, int64_t>& m,
                                                    size_t keep) {
  std::vector<std::pair<std::string, int64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > keep) {
    int64_t rest = 0;
    for (size_t i = keep; i < v.size(); ++i) rest += v[i].second;
    v.resize(keep);
    v.emplace_back(Format("(%zu others)", m.size() - keep), rest);
  }
  return v;
}

// Rows per class of lexer state (a shared group counted once, under its
// first state) and per first terminal of the row's sequence.
void RowSources(const CompiledStore& s, ReductionReport* out) {
  std::vector<int32_t> first_state(s.num_roots, -1);
  for (int32_t q = 0; q < s.num_lex_states; ++q) {
    const int32_t g = s.root_index[q];
    if (g >= 0 && first_state[g] < 0) first_state[g] = q;
  }
  std::map<std::string, int64_t> by_class, by_terminal;
  for (int32_t g = 0; g < s.num_roots; ++g) {
    const int64_t n = s.root_row_offsets[g + 1] - s.root_row_offsets[g];
    if (first_state[g] >= 0) by_class[StateClass(s, first_state[g])] += n;
    for (int32_t r = s.root_row_offsets[g]; r < s.root_row_offsets[g + 1]; ++r) {
      const int32_t seq = s.row_seq[r];
      std::string label = "(no terminal ends)";
      for (int32_t i = s.seq_offsets[seq]; i < s.seq_offsets[seq + 1]; ++i) {
        const int32_t item = s.seq_data[i];
        if (s.KindOf(item) == ItemKind::kEmit) {
          label = s.terminal_names[s.item_terminal[item]];
          break;
        }
      }
      ++by_terminal[label];
    }
  }
  // Rows equal in sequence and tokens, counted once over all groups: what a
  // store whose groups referenced shared rows would hold.
  std::set<std::pair<int32_t, std::vector<int32_t>>> distinct;
  std::vector<int32_t> toks;
  for (int32_t r = 0; r < s.root_row_offsets[s.num_roots]; ++r) {
    toks.clear();
    DecodeRow(s, r, &toks);
    distinct.emplace(s.row_seq[r], toks);
  }
  out->distinct_rows = static_cast<int64_t>(distinct.size());
  out->rows_by_state_class = Sorted(by_class, 12);
  out->rows_by_first_terminal = Sorted(by_terminal, 12);
}

// How many rows a store would keep if interchangeable terminals were
// merged: per group, the distinct sequences once every Emit's terminal is
// replaced by its class's first member (an estimate of what that step
// could merge; whether each merge is exact is not decided here).
int64_t InterchangeableBound(const CompiledStore& s,
                             const std::vector<std::vector<std::string>>& classes) {
  std::map<std::string, int32_t> id;
  for (int32_t t = 0; t < s.num_terminals; ++t) id[s.terminal_names[t]] = t;
  std::vector<int32_t> rep(s.num_terminals);
  for (int32_t t = 0; t < s.num_terminals; ++t) rep[t] = t;
  for (const auto& c : classes) {
    int32_t first = -1;
    for (const std::string& name : c) {
      auto it = id.find(name);
      if (it == id.end()) continue;
      if (first < 0) first = it->second;
      rep[it->second] = first;
    }
  }
  int64_t total = 0;
  std::set<std::vector<int64_t>> keys;
  for (int32_t g = 0; g < s.num_roots; ++g) {
    keys.clear();
    for (int32_t r = s.root_row_offsets[g]; r < s.root_row_offsets[g + 1]; ++r) {
      const int32_t seq = s.row_seq[r];
      std::vector<int64_t> key;
      for (int32_t i = s.seq_offsets[seq]; i < s.seq_offsets[seq + 1]; ++i) {
        const int32_t item = s.seq_data[i];
        if (s.KindOf(item) == ItemKind::kEmit) {
          key.push_back(rep[s.item_terminal[item]]);
          key.push_back(s.item_blockers[item]);
          key.push_back(s.item_full[item]);
          key.push_back(int64_t{s.item_col_abs[item]} << 32 | static_cast<uint32_t>(s.item_col[item]));
        } else {
          key.push_back(-1 - int64_t{item});
        }
      }
      keys.insert(std::move(key));
    }
    total += static_cast<int64_t>(keys.size());
  }
  return total;
}

int64_t PeakRssBytes() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

// Steps both sessions by the same token (or bytes); false when either refuses.
bool Step(Session* a, Session* b, const Segment& seg, std::string_view text) {
  if (seg.token >= 0) return a->Advance(seg.token).ok() && b->Advance(seg.token).ok();
  const std::string_view bytes = text.substr(seg.offset, seg.length);
  return a->AdvanceBytes(bytes).ok() && b->AdvanceBytes(bytes).ok();
}

// One step's cost on both stores, their masks compared.
class Lockstep {
 public:
  Lockstep(const CompiledStore& plain, const CompiledStore& streamlined, ReductionReport* r)
      : plain_(&plain, Limits()), lean_(&streamlined, Limits()), store_(&streamlined), r_(r),
        mask_a_(plain.mask_words()), mask_b_(plain.mask_words()) {
    plain_.set_counters(&ca_);
    lean_.set_counters(&cb_);
  }
  void Reset() {
    plain_.Reset();
    lean_.Reset();
  }
  // Fills both masks and records the step; the streamlined store's mask.
  const std::vector<uint32_t>& Measure() {
    bool boundary = false;
    // At a terminal boundary: some hypothesis is at a terminal's start or
    // can end its terminal here, so the next token may begin a new one.
    for (const LiveState& l : lean_.live()) {
      boundary |= store_->at_start[l.q] != 0 ||
                  store_->cand_offsets[l.q] < store_->cand_offsets[l.q + 1];
    }
    const StepCounters a0 = ca_, b0 = cb_;
    plain_.FillMask(mask_a_.data());
    lean_.FillMask(mask_b_.data());
    Record(&r_->plain, a0, ca_, boundary);
    Record(&r_->streamlined, b0, cb_, boundary);
    if (mask_a_ != mask_b_) {
      if (r_->mask_mismatches++ == 0) {
        r_->first_mismatch = Format("after %zu bytes of text \"%s\"", lean_.text().size(),
                                    lean_.text().substr(0, 80).c_str());
      }
    }
    return mask_b_;
  }
  bool Advance(const Segment& seg, std::string_view text) { return Step(&plain_, &lean_, seg, text); }

 private:
  static SessionLimits Limits() {
    SessionLimits l;
    l.memo_bytes = 0;  // every step checks its rows
    return l;
  }
  static void Record(StepCost* c, const StepCounters& before, const StepCounters& after,
                     bool boundary) {
    const double checks = static_cast<double>(after.parser_checks - before.parser_checks);
    const double ored = static_cast<double>(after.rows_accepted - before.rows_accepted);
    ++c->steps;
    c->checks.push_back(checks);
    c->ored.push_back(ored);
    c->rows_visited += after.rows_visited - before.rows_visited;
    if (boundary) {
      ++c->boundary_steps;
      c->checks_boundary.push_back(checks);
      c->ored_boundary.push_back(ored);
    }
  }
  Session plain_, lean_;
  const CompiledStore* store_;
  ReductionReport* r_;
  StepCounters ca_, cb_;
  std::vector<uint32_t> mask_a_, mask_b_;
};

Status ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::kInvalidArgument, path + ": cannot read the corpus file");
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

}  // namespace

Status RunReduction(const std::string& grammar_path, const std::string& tokenizer_path,
                    const ReductionOptions& options, ReductionReport* out,
                    CompiledStore* streamlined) {
  ReductionReport& r = *out;
  std::vector<std::string> texts;
  for (const std::string& f : options.corpus) {
    texts.emplace_back();
    CFGMASK_RETURN_IF_ERROR(ReadText(f, &texts.back()));
  }
  CompileOptions co = options.compile;
  co.prune_pairs = false;  // the seed's starting point: every lexing
  CompiledStore plain, lean;
  CompileDetails details;
  details.unstreamlined = &plain;
  const auto t0 = std::chrono::steady_clock::now();
  CFGMASK_RETURN_IF_ERROR(CompileGrammar(grammar_path, tokenizer_path, co, /*streamline=*/true,
                                         &lean, "", &details));
  r.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_rss_bytes = PeakRssBytes();
  r.grammar = lean.grammar_name;
  r.start = lean.start;
  r.tokenizer = lean.tokenizer_name;
  r.vocab_size = lean.vocab_size;
  r.terminals = lean.num_terminals;
  r.lalr_states = lean.num_states;
  r.lexer_states = lean.num_lex_states;
  r.roots = plain.num_roots;
  r.steps = details.streamline_steps;
  r.interchangeable = details.interchangeable;
  RowSources(lean, &r);
  r.rows_interchangeable_bound = InterchangeableBound(lean, r.interchangeable);

  Lockstep ls(plain, lean, &r);
  std::mt19937_64 rng(options.seed);
  if (!options.corpus.empty()) {
    Segmenter segmenter(lean);
    r.workload = Format("%zu files, greedy segmentation", options.corpus.size());
    for (size_t f = 0; f < texts.size(); ++f) {
      ++r.texts;
      ls.Reset();
      bool ok = true;
      for (const Segment& seg : segmenter.Cut(texts[f], SegmentMode::kGreedy, &rng)) {
        ls.Measure();
        if (!ls.Advance(seg, texts[f])) {
          ok = false;
          break;
        }
      }
      if (ok) ls.Measure();  // the end
      r.texts_not_finished += !ok;
    }
  } else {
    r.workload = Format("%" PRId64 " random walks of up to %" PRId64 " tokens (printable ASCII)",
                        options.walks, options.max_tokens);
    for (int64_t w = 0; w < options.walks; ++w) {
      ++r.texts;
      ls.Reset();
      for (int64_t k = 0; k < options.max_tokens; ++k) {
        const std::vector<uint32_t>& mask = ls.Measure();
        const int32_t tok = DrawToken(lean, mask, 0.02, &rng, /*ascii_only=*/true);
        if (tok < 0 || std::find(lean.eos_ids.begin(), lean.eos_ids.end(), tok) != lean.eos_ids.end())
          break;
        if (!ls.Advance(Segment{tok, 0, 0}, "")) {
          ++r.texts_not_finished;
          break;
        }
      }
    }
  }
  for (StepCost* c : {&r.plain, &r.streamlined}) {
    for (auto* v : {&c->checks, &c->ored, &c->checks_boundary, &c->ored_boundary})
      std::sort(v->begin(), v->end());
  }
  r.peak_rss_bytes = std::max(r.peak_rss_bytes, PeakRssBytes());
  if (streamlined) *streamlined = std::move(lean);
  return Status::Ok();
}

namespace {

nlohmann::ordered_json CostJson(const StepCost& c) {
  auto dist = [](const std::vector<double>& v) {
    return nlohmann::ordered_json{{"mean", Round(Mean(v), 100)},
                                  {"p50", Percentile(v, 0.5)},
                                  {"p99", Percentile(v, 0.99)},
                                  {"max", v.empty() ? 0.0 : v.back()}};
  };
  return {{"steps", c.steps},
          {"boundary_steps", c.boundary_steps},
          {"parser_checks", dist(c.checks)},
          {"parser_checks_boundary", dist(c.checks_boundary)},
          {"rows_ored", dist(c.ored)},
          {"rows_ored_boundary", dist(c.ored_boundary)},
          {"rows_visited", c.rows_visited}};
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

}  // namespace

std::string ReductionReportJson(const ReductionReport& r) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["grammar"] = r.grammar;
  j["start"] = r.start;
  j["tokenizer"] = {{"name", r.tokenizer}, {"vocab_size", r.vocab_size}};
  j["terminals"] = r.terminals;
  j["lalr_states"] = r.lalr_states;
  j["lexer_states"] = r.lexer_states;
  j["boundary_lexer_states"] = r.roots;
  j["compile_seconds"] = Round(r.compile_seconds, 1e3);
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  ordered_json steps = ordered_json::array();
  const double first = r.steps.empty() ? 0 : static_cast<double>(r.steps[0].rows);
  const double first_keys = r.steps.empty() ? 0 : static_cast<double>(r.steps[0].keys);
  for (const StreamlineStep& s : r.steps) {
    steps.push_back({{"step", s.name},
                     {"rows", s.rows},
                     {"row_bytes", s.bytes},
                     {"seed_keys", s.keys},
                     {"row_groups", s.groups},
                     {"reduction", Round(Ratio(first, s.rows), 1e3)},
                     {"seed_keys_reduction", Round(Ratio(first_keys, s.keys), 1e3)},
                     {"queries", s.queries},
                     {"seconds", Round(s.seconds, 1e6)},
                     {"payloads", s.payloads},
                     {"payloads_reduction", Round(Ratio(first, s.payloads), 1e3)}});
  }
  j["steps"] = steps;
  ordered_json classes = ordered_json::array();
  for (const auto& c : r.interchangeable) classes.push_back(c);
  j["interchangeable"] = classes;
  auto pairs = [](const std::vector<std::pair<std::string, int64_t>>& v) {
    ordered_json a = ordered_json::array();
    for (const auto& [k, n] : v) a.push_back({k, n});
    return a;
  };
  j["distinct_rows"] = r.distinct_rows;
  j["rows_interchangeable_bound"] = r.rows_interchangeable_bound;
  j["rows_by_state_class"] = pairs(r.rows_by_state_class);
  j["rows_by_first_terminal"] = pairs(r.rows_by_first_terminal);
  j["workload"] = {{"what", r.workload}, {"texts", r.texts}, {"not_finished", r.texts_not_finished}};
  j["no_streamline"] = CostJson(r.plain);
  j["streamlined"] = CostJson(r.streamlined);
  j["checks_ratio"] = Round(Ratio(Mean(r.plain.checks), Mean(r.streamlined.checks)), 1e3);
  j["checks_ratio_boundary"] =
      Round(Ratio(Mean(r.plain.checks_boundary), Mean(r.streamlined.checks_boundary)), 1e3);
  j["mask_mismatches"] = r.mask_mismatches;
  if (r.mask_mismatches) j["first_mismatch"] = r.first_mismatch;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string ReductionReportText(const ReductionReport& r) {
  std::string out;
  out += Format("%s (start: %s) x %s (%d tokens): %d terminals, %d LALR states, %d lexer states "
                "(%d at token boundaries); compile %.2f s, peak RSS %s\n",
                r.grammar.c_str(), r.start.c_str(), r.tokenizer.c_str(), r.vocab_size, r.terminals,
                r.lalr_states, r.lexer_states, r.roots, r.compile_seconds,
                HumanBytes(r.peak_rss_bytes).c_str());
  out += Format("  %-20s %12s %8s %12s %8s %12s %8s %12s %8s\n", "step", "rows", "x", "seed keys",
                "x", "row bytes", "groups", "payloads", "x");
  const double first = r.steps.empty() ? 0 : static_cast<double>(r.steps[0].rows);
  const double first_keys = r.steps.empty() ? 0 : static_cast<double>(r.steps[0].keys);
  for (const StreamlineStep& s : r.steps) {
    out += Format("  %-20s %12" PRId64 " %7.2fx %12" PRId64 " %7.2fx %12s %8d %12" PRId64 " %7.2fx\n",
                  s.name.c_str(), s.rows, Ratio(first, s.rows), s.keys, Ratio(first_keys, s.keys),
                  HumanBytes(s.bytes).c_str(), s.groups, s.payloads, Ratio(first, s.payloads));
  }
  if (!r.interchangeable.empty()) {
    size_t n = 0;
    for (const auto& c : r.interchangeable) n += c.size();
    out += Format("  interchangeable terminals: %zu classes of %zu terminals\n",
                  r.interchangeable.size(), n);
  }
  out += Format("  distinct rows over all groups (sequence and tokens): %" PRId64
                " (%.2fx); rows are references, each distinct token set stored once (payloads)\n",
                r.distinct_rows, Ratio(first, static_cast<double>(r.distinct_rows)));
  out += Format("  rows with interchangeable Emits keyed by their class (an estimate; not applied): %" PRId64
                " rows (%.2fx)\n", r.rows_interchangeable_bound,
                Ratio(first, static_cast<double>(r.rows_interchangeable_bound)));
  out += "  rows by lexer state:";
  for (const auto& [k, n] : r.rows_by_state_class) out += Format(" %s %" PRId64 ";", k.c_str(), n);
  out += "\n  rows by first terminal:";
  for (const auto& [k, n] : r.rows_by_first_terminal) out += Format(" %s %" PRId64 ";", k.c_str(), n);
  out += "\n";
  out += Format("  per decoding step, %s (%" PRId64 " steps, %" PRId64 " at a terminal boundary",
                r.workload.c_str(), r.streamlined.steps, r.streamlined.boundary_steps);
  if (r.texts_not_finished) out += Format(", %" PRId64 " texts not finished", r.texts_not_finished);
  out += "):\n";
  out += Format("  %-14s %22s %22s %22s %22s\n", "store", "checks mean / p99", "at boundary",
                "rows ORed mean / p99", "at boundary");
  const std::pair<const char*, const StepCost*> stores[] = {{"no streamline", &r.plain},
                                                             {"streamlined", &r.streamlined}};
  for (const auto& [name, c] : stores) {
    out += Format("  %-14s %13.1f / %6.0f %13.1f / %6.0f %13.1f / %6.0f %13.1f / %6.0f\n", name,
                  Mean(c->checks), Percentile(c->checks, 0.99), Mean(c->checks_boundary),
                  Percentile(c->checks_boundary, 0.99), Mean(c->ored), Percentile(c->ored, 0.99),
                  Mean(c->ored_boundary), Percentile(c->ored_boundary, 0.99));
  }
  out += Format("  fewer parser checks: %.2fx overall, %.2fx at boundaries; masks %s\n",
                Ratio(Mean(r.plain.checks), Mean(r.streamlined.checks)),
                Ratio(Mean(r.plain.checks_boundary), Mean(r.streamlined.checks_boundary)),
                r.mask_mismatches ? ("DIFFER at " + std::to_string(r.mask_mismatches) +
                                     " steps, first " + r.first_mismatch).c_str()
                                  : "identical at every step");
  return out;
}

Status DrawReductionPlot(const std::string& json, const std::string& out,
                         const std::string& python) {
  const std::string tmp = out + ".json.tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << json;
    if (!f.flush()) {
      std::remove(tmp.c_str());
      return Status(ErrorCode::kIo, tmp + ": cannot write: " + std::strerror(errno));
    }
  }
  std::vector<std::string> argv_s = {python, "-m", "cfgmask", "plot-reduction", tmp, "-o", out};
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  std::remove(tmp.c_str());
  if (rc != 0) {
    return Status(ErrorCode::kIo,
                  python + ": cannot run it to draw the plot: " + std::strerror(rc));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(ErrorCode::kIo, out + ": the plot was not drawn (" + python +
                                      " -m cfgmask plot-reduction failed; it needs the cfgmask "
                                      "package and matplotlib)");
  }
  return Status::Ok();
}

}  // namespace cfgmask
