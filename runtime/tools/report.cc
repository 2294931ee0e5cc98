// Statistics gathered once, rendered as text and as JSON: see report.h.
#include "runtime/tools/report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "grammar/base/utf8.h"
#include "maskstore/row_codec.h"

namespace cfgmask {

std::string Format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

double Round(double v, double scale) { return std::round(v * scale) / scale; }

namespace {


double Seconds(const StoreReport& r, const std::string& phase) {
  for (const auto& [name, s] : r.seconds) {
    if (name == phase) return s;
  }
  return 0;
}

std::string StreamlineLine(const StoreReport& r) {
  if (!r.streamlined) return "off (compiled with --no-streamline)";
  return Format("rows %" PRId64 " -> %" PRId64 " (%.2fx): %" PRId64 " never legal deleted, %" PRId64
                " always-legal suffixes folded, %.2f s",
                r.rows_before_streamlining, r.rows_after_fold,
                r.rows_after_fold ? static_cast<double>(r.rows_before_streamlining) / r.rows_after_fold
                                  : 0.0,
                r.rows_deleted, r.rows_folded, Seconds(r, "streamline"));
}

}  // namespace

double StoreReport::TotalSeconds() const {
  double total = 0;
  for (const auto& [name, s] : seconds) {
    if (name != "tokenizer") total += s;
  }
  return total;
}

std::string MessageLine(const std::string& message) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const uint8_t c = static_cast<uint8_t>(message[i]);
    if (c == '\n' || c == '\r') {
      out += ' ';
      ++i;
      continue;
    }
    const size_t len = c < 0x20 || c == 0x7f ? 0 : Utf8SequenceLength(message, i);
    if (len > 0) {
      out.append(message, i, len);
      i += len;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  constexpr size_t kKeep = 900, kHead = 700;
  if (out.size() <= kKeep) return out;
  // Cut at character boundaries: a head (the position, the error) and a tail.
  size_t head = kHead;
  while (head > 0 && (static_cast<uint8_t>(out[head]) & 0xC0) == 0x80) --head;
  size_t tail = out.size() - (kKeep - kHead - 60);
  while (tail < out.size() && (static_cast<uint8_t>(out[tail]) & 0xC0) == 0x80) ++tail;
  return out.substr(0, head) + " ... [" + std::to_string(tail - head) + " bytes cut] ... " +
         out.substr(tail);
}

StoreReport MakeStoreReport(const CompiledStore& s, const std::string& file, int64_t file_bytes) {
  StoreReport r;
  r.file = file;
  r.file_bytes = file_bytes;
  r.grammar = s.grammar_name;
  r.start = s.start;
  r.tokenizer_name = s.tokenizer_name;
  r.vocab_size = s.vocab_size;
  r.eos_ids = s.eos_ids.ToVector();
  r.tokenizer_identity = s.tokenizer_identity;
  r.terminals = s.num_terminals;
  r.rules = static_cast<int64_t>(s.rule_lhs.size());
  r.nonterminals = s.num_nonterminals;
  r.lalr_states = s.num_states;
  r.lexer_states = s.num_lex_states;
  r.roots = s.num_roots;
  for (int32_t t = 0; t < s.num_terminals; ++t) {
    if (!s.terminal_next_any[t]) r.followers_checked.push_back(s.terminal_names[t]);
  }
  r.items = static_cast<int64_t>(s.item_kind.size());
  r.sequences = s.seq_offsets.empty() ? 0 : static_cast<int64_t>(s.seq_offsets.size()) - 1;
  r.nfa_transition_entries = s.stats.nfa_transition_entries;
  r.rows = static_cast<int64_t>(s.row_seq.size());
  // The keys follow every row's sequence id: only over rows that passed
  // their check (a damaged file's ids may point anywhere); callers refuse a
  // damaged store first (StoreRowsStatus), -1 here is a last guard.
  r.terminal_sequence_keys = s.AllRowsOk() ? TerminalSequenceKeys(s) : -1;
  r.simulated_pairs = static_cast<int64_t>(s.sim_token.size());
  for (int32_t k : s.row_kind) {
    switch (static_cast<RowKind>(k)) {
      case RowKind::kList: ++r.rows_list; break;
      case RowKind::kComplement: ++r.rows_complement; break;
      case RowKind::kBitset: ++r.rows_bitset; break;
    }
  }
  r.row_token_entries = static_cast<int64_t>(s.row_tokens.size());
  r.row_bitset_words = static_cast<int64_t>(s.row_bits.size());
  r.memory_bytes = static_cast<int64_t>(s.MemoryBytes());
  const auto& t = s.stats;
  r.streamlined = t.streamlined != 0;
  r.rows_before_streamlining = t.rows_before_streamlining;
  r.row_bytes_before = t.row_bytes_before;
  r.rows_deleted = t.rows_deleted;
  r.never_queries = t.never_queries;
  r.rows_after_fold = t.rows_after_fold;
  r.row_bytes_after = t.row_bytes_after;
  r.fold_queries = t.fold_queries;
  r.rows_folded = t.fold_proved;
  r.seconds = {{"grammar", t.seconds_grammar},     {"lalr", t.seconds_lalr},
               {"automaton", t.seconds_automaton}, {"tokenizer", t.seconds_tokenizer},
               {"store", t.seconds_store},         {"streamline", t.seconds_streamline}};
  return r;
}

std::string StoreReportText(const StoreReport& r) {
  std::string eos;
  for (int32_t e : r.eos_ids) eos += (eos.empty() ? "" : ", ") + std::to_string(e);
  if (eos.empty()) eos = "none";
  std::string out;
  out += Format("%s: grammar %s (start: %s)\n", r.file.c_str(), r.grammar.c_str(), r.start.c_str());
  out += Format("  tokenizer        %s, %d tokens, EOS %s\n", r.tokenizer_name.c_str(), r.vocab_size,
                eos.c_str());
  out += Format("  terminals        %d\n", r.terminals);
  out += Format("  rules            %" PRId64 " (%d nonterminals)\n", r.rules, r.nonterminals);
  out += Format("  LALR states      %d\n", r.lalr_states);
  out += Format("  lexer states     %d (%d at token boundaries)\n", r.lexer_states, r.roots);
  std::string checked;
  for (const std::string& n : r.followers_checked) checked += (checked.empty() ? "" : " ") + n;
  out += Format("  followers        %zu terminals checked at a token's end%s%s\n",
                r.followers_checked.size(), checked.empty() ? "" : ": ", checked.c_str());
  out += Format("  nfa_transition   %" PRId64 " entries\n", r.nfa_transition_entries);
  out += Format("  store rows       %" PRId64 " (list %" PRId64 ", complement %" PRId64
                ", bitset %" PRId64 "); %" PRId64 " keyed by terminals alone\n",
                r.rows, r.rows_list, r.rows_complement, r.rows_bitset, r.terminal_sequence_keys);
  out += Format("  simulated tokens %" PRId64 " (root, token) pairs checked at run time\n",
                r.simulated_pairs);
  out += "  streamlining     " + StreamlineLine(r) + "\n";
  out += "  size             " + HumanBytes(r.file_bytes) + " on disk, " +
         HumanBytes(r.memory_bytes) + " in memory\n";
  out += Format("  seconds          grammar %.2f, lalr %.2f, automaton+walk %.2f (tokenizer %.2f), "
                "store %.2f, streamline %.2f, total %.2f\n",
                Seconds(r, "grammar"), Seconds(r, "lalr"), Seconds(r, "automaton"),
                Seconds(r, "tokenizer"), Seconds(r, "store"), Seconds(r, "streamline"),
                r.TotalSeconds());
  return out;
}

std::string StoreReportJson(const StoreReport& r) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["file"] = r.file;
  j["grammar"] = r.grammar;
  j["start"] = r.start;
  j["tokenizer"] = {{"name", r.tokenizer_name},
                    {"vocab_size", r.vocab_size},
                    {"eos_ids", r.eos_ids},
                    {"identity", Format("%016" PRIx64, r.tokenizer_identity)}};
  j["terminals"] = r.terminals;
  j["rules"] = r.rules;
  j["nonterminals"] = r.nonterminals;
  j["lalr_states"] = r.lalr_states;
  j["lexer_states"] = r.lexer_states;
  j["roots"] = r.roots;
  j["followers_checked"] = r.followers_checked;
  j["items"] = r.items;
  j["sequences"] = r.sequences;
  j["nfa_transition_entries"] = r.nfa_transition_entries;
  j["rows"] = r.rows;
  j["rows_before_streamlining"] = r.rows_before_streamlining;
  j["terminal_sequence_keys"] = r.terminal_sequence_keys;
  j["simulated_pairs"] = r.simulated_pairs;
  ordered_json steps = ordered_json::array();
  steps.push_back({{"step", "nfa_transition"},
                   {"rows", r.rows_before_streamlining},
                   {"row_bytes", r.row_bytes_before}});
  if (r.streamlined) {
    steps.push_back({{"step", "delete_never_legal"},
                     {"rows", r.rows_before_streamlining - r.rows_deleted},
                     {"rows_deleted", r.rows_deleted},
                     {"queries", r.never_queries}});
    steps.push_back({{"step", "fold_always_legal"},
                     {"rows", r.rows_after_fold},
                     {"row_bytes", r.row_bytes_after},
                     {"queries", r.fold_queries},
                     {"rows_folded", r.rows_folded},
                     {"seconds", Round(Seconds(r, "streamline"), 1e6)}});
  }
  j["streamlining"] = {{"applied", r.streamlined}, {"steps", steps}};
  j["row_kinds"] = {
      {"list", r.rows_list}, {"complement", r.rows_complement}, {"bitset", r.rows_bitset}};
  j["row_token_entries"] = r.row_token_entries;
  j["row_bitset_words"] = r.row_bitset_words;
  j["file_bytes"] = r.file_bytes;
  j["memory_bytes"] = r.memory_bytes;
  ordered_json seconds = ordered_json::object();
  for (const auto& [name, s] : r.seconds) seconds[name] = Round(s, 1e6);
  seconds["total"] = Round(r.TotalSeconds(), 1e6);
  j["seconds"] = seconds;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * (sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

namespace {

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

}  // namespace

std::string BenchReportText(const BenchReport& r) {
  const std::vector<double>& s = r.mask_us;
  std::string out;
  out += Format("%" PRId64 " files, %zu steps (%s segmentation)\n", r.files, s.size(),
                r.segment.c_str());
  out += Format("  FillMask µs      p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean %.1f\n",
                Percentile(s, 0.5), Percentile(s, 0.9), Percentile(s, 0.99),
                s.empty() ? 0 : s.back(), Mean(s));
  out += Format("  Advance          %.0f tokens/s, at most %" PRId64 " live hypotheses\n",
                r.advance_tokens_per_s, r.max_live);
  out += Format("  store load       %.3f s\n", r.store_load_seconds);
  out += "  peak RSS         " + HumanBytes(r.peak_rss_bytes) + "\n";
  auto line = [&](const char* what, const std::vector<double>& v) {
    out += Format("  %-16s %zu steps: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean %.1f µs\n", what,
                  v.size(), Percentile(v, 0.5), Percentile(v, 0.9), Percentile(v, 0.99),
                  v.empty() ? 0 : v.back(), Mean(v));
  };
  line("thread CPU time", r.mask_cpu_us);
  if (r.preempted_steps > 0) {
    out += Format("  %" PRId64 " steps took over 1 ms more wall time than CPU time (the thread "
                  "was preempted: a loaded machine)\n", r.preempted_steps);
  }
  line("first step", r.mask_us_first);
  out += Format("  first step of the run (store just opened) %.1f µs\n", r.first_step_cold_us);
  if (r.prefault) {
    out += Format("  prefault         every root's rows checked before the run: %.3f s\n",
                  r.prefault_seconds);
  }
  if (r.memo_mb > 0) {
    out += Format("  row memo         %" PRId64 " MiB: %" PRId64 " hits, %" PRId64 " misses\n",
                  r.memo_mb, r.memo_hits, r.memo_misses);
    line("without a miss", r.mask_us_hit);
    line("with a miss", r.mask_us_miss);
  }
  if (!s.empty()) {
    out += Format("  per step         %.1f parser checks, %.1f rows walked, %.1f parser reductions "
                  "(max %" PRId64 "), %.1f µs in the filter after the rows (mean, wall time)\n",
                  static_cast<double>(r.parser_checks) / s.size(),
                  static_cast<double>(r.rows_visited) / s.size(),
                  static_cast<double>(r.reductions) / s.size(), r.max_step_reductions,
                  r.filter_seconds * 1e6 / s.size());
  }
  for (size_t i = 0; i < r.slowest.size(); ++i) {
    const BenchReport::SlowStep& st = r.slowest[i];
    out += Format("  %-16s %s: %.1f µs CPU (%.1f wall, of it %.1f in the filter)%s, %" PRId64
                  " parser checks, %" PRId64 " reductions, %" PRId64 " tokens allowed\n",
                  i == 0 ? "slowest steps" : "", st.where.c_str(), st.cpu_us, st.wall_us,
                  st.filter_us, st.memo_miss ? ", memo miss" : "", st.parser_checks,
                  st.reductions, st.allowed);
  }
  if (r.files_not_finished) {
    out += Format("  %" PRId64 " files not teacher-forced to the end\n", r.files_not_finished);
  }
  return out;
}

std::string BenchReportJson(const BenchReport& r) {
  using nlohmann::ordered_json;
  const std::vector<double>& s = r.mask_us;
  ordered_json j;
  j["files"] = r.files;
  j["files_not_finished"] = r.files_not_finished;
  j["steps"] = s.size();
  j["segment"] = r.segment;
  j["mask_us"] = {{"p50", Round(Percentile(s, 0.5), 1e3)},
                  {"p90", Round(Percentile(s, 0.9), 1e3)},
                  {"p99", Round(Percentile(s, 0.99), 1e3)},
                  {"max", Round(s.empty() ? 0 : s.back(), 1e3)},
                  {"mean", Round(Mean(s), 1e3)}};
  j["advance_tokens_per_s"] = Round(r.advance_tokens_per_s, 10);
  j["max_live"] = r.max_live;
  j["store_load_seconds"] = Round(r.store_load_seconds, 1e6);
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  auto quantiles = [](const std::vector<double>& v) {
    return ordered_json{{"steps", v.size()},
                        {"p50", Round(Percentile(v, 0.5), 1e3)},
                        {"p90", Round(Percentile(v, 0.9), 1e3)},
                        {"p99", Round(Percentile(v, 0.99), 1e3)},
                        {"max", Round(v.empty() ? 0 : v.back(), 1e3)},
                        {"mean", Round(Mean(v), 1e3)}};
  };
  j["mask_cpu_us"] = quantiles(r.mask_cpu_us);
  j["preempted_steps"] = r.preempted_steps;
  j["first_step_us"] = quantiles(r.mask_us_first);
  j["first_step_cold_us"] = Round(r.first_step_cold_us, 1e3);
  j["prefault"] = r.prefault;
  j["prefault_seconds"] = Round(r.prefault_seconds, 1e6);
  j["memo"] = {{"mb", r.memo_mb},
               {"hits", r.memo_hits},
               {"misses", r.memo_misses},
               {"steps_without_miss", r.mask_us_hit.size()},
               {"p50_without_miss", Round(Percentile(r.mask_us_hit, 0.5), 1e3)},
               {"p50_with_miss", Round(Percentile(r.mask_us_miss, 0.5), 1e3)},
               {"without_miss_us", quantiles(r.mask_us_hit)},
               {"with_miss_us", quantiles(r.mask_us_miss)}};
  j["parser_checks"] = r.parser_checks;
  j["rows_visited"] = r.rows_visited;
  j["reductions"] = r.reductions;
  j["max_step_reductions"] = r.max_step_reductions;
  j["filter_seconds"] = Round(r.filter_seconds, 1e6);
  j["slowest_steps"] = ordered_json::array();
  for (const BenchReport::SlowStep& st : r.slowest) {
    j["slowest_steps"].push_back({{"where", st.where},
                                  {"cpu_us", Round(st.cpu_us, 1e3)},
                                  {"wall_us", Round(st.wall_us, 1e3)},
                                  {"filter_us", Round(st.filter_us, 1e3)},
                                  {"memo_miss", st.memo_miss},
                                  {"parser_checks", st.parser_checks},
                                  {"rows_visited", st.rows_visited},
                                  {"reductions", st.reductions},
                                  {"allowed", st.allowed}});
  }
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string HumanBytes(int64_t n) {
  if (n < 1024) return Format("%" PRId64 " B", n);
  if (n < 1024 * 1024) return Format("%.1f KiB", n / 1024.0);
  if (n < int64_t{1024} * 1024 * 1024) return Format("%.1f MiB", n / 1048576.0);
  return Format("%.2f GiB", n / 1073741824.0);
}

}  // namespace cfgmask
