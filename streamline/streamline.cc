// The streamlining pass: see streamline.h.
#include "streamline/streamline.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "maskstore/row_codec.h"
#include "streamline/always_legal.h"
#include "streamline/exploration.h"
#include "streamline/interchangeable.h"
#include "streamline/never_legal.h"

namespace cfgmask {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Status StreamlineStore(CompiledStore* store, const StreamlineOptions& options,
                       StreamlineStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  CompiledStore& s = *store;
  StreamlineStats st;
  st.rows_before = static_cast<int64_t>(s.row_seq.size());
  st.bytes_before = RowPayloadBytes(s);

  // Existing sequences by content, so that a prefix that is already a
  // sequence keeps its id.
  const int32_t num_seqs = static_cast<int32_t>(s.seq_offsets.size()) - 1;
  std::unordered_map<std::vector<int32_t>, int32_t, SequenceHash> seq_id;
  seq_id.reserve(num_seqs * 2);
  for (int32_t q = 0; q < num_seqs; ++q)
    seq_id.emplace(std::vector<int32_t>(s.seq_data.begin() + s.seq_offsets[q],
                                        s.seq_data.begin() + s.seq_offsets[q + 1]),
                   q);

  // The two row steps ask one exploration (its memos are per question, so
  // running the steps one after the other asks each memo the same queries
  // in the same order as interleaving them would).
  ItemExploration exploration(s, ExplorationOptions{options.max_stack, options.max_steps});
  st.steps.push_back({"every lexing", st.rows_before, st.bytes_before, 0, 0});

  // Never legal: per sequence, in the order the rows meet them.
  auto t_step = std::chrono::steady_clock::now();
  std::vector<int8_t> dead(num_seqs, -1);
  NeverLegalStep never(s, &exploration);
  int64_t rows_live = 0, bytes_live = 0;
  for (int32_t r = 0; r < s.root_row_offsets[s.num_roots]; ++r) {
    const int32_t seq = s.row_seq[r];
    if (dead[seq] < 0) dead[seq] = options.delete_never && never.Dead(seq);
    if (!dead[seq]) ++rows_live, bytes_live += 16 + 4 * int64_t{s.row_length[r]};
  }
  st.never_queries = never.counts().queries;
  // Rows past the roots' (the simulated tokens') are kept as they are.
  for (int32_t r = s.root_row_offsets[s.num_roots]; r < static_cast<int32_t>(s.row_seq.size()); ++r)
    ++rows_live, bytes_live += 16 + 4 * int64_t{s.row_length[r]};
  st.steps.push_back({"never legal", rows_live, bytes_live, never.counts().queries,
                      SecondsSince(t_step)});

  // Always legal: per sequence left, the length of the prefix it folds into
  // (0 for a deleted one).
  t_step = std::chrono::steady_clock::now();
  std::vector<int32_t> fold_len(num_seqs, -1);
  AlwaysLegalStep always(s, &exploration);
  for (int32_t r = 0; r < s.root_row_offsets[s.num_roots]; ++r) {
    const int32_t seq = s.row_seq[r];
    if (fold_len[seq] >= 0) continue;
    fold_len[seq] = dead[seq] ? 0
                    : options.fold ? always.FoldLength(seq)
                                   : s.seq_offsets[seq + 1] - s.seq_offsets[seq];
  }
  st.queries = always.counts().queries;
  st.cache_hits = never.counts().cache_hits + always.counts().cache_hits;
  st.budget_exceeded = never.counts().budget_exceeded + always.counts().budget_exceeded;

  std::vector<int32_t> old_root_offsets = s.root_row_offsets.Release();
  std::vector<int32_t> old_seq = s.row_seq.Release(), old_kind = s.row_kind.Release(),
                       old_offset = s.row_offset.Release(), old_length = s.row_length.Release(),
                       old_tokens = s.row_tokens.Release();
  std::vector<uint32_t> old_bits = s.row_bits.Release();
  CompiledStore old_rows;  // a view for DecodeRow
  old_rows.vocab_size = s.vocab_size;
  old_rows.token_special = s.token_special;
  old_rows.row_kind = std::move(old_kind);
  old_rows.row_offset = std::move(old_offset);
  old_rows.row_length = std::move(old_length);
  old_rows.row_tokens = std::move(old_tokens);
  old_rows.row_bits = std::move(old_bits);

  s.root_row_offsets.assign(1, 0);
  s.row_seq.clear();
  s.row_kind.clear();
  s.row_offset.clear();
  s.row_length.clear();
  s.row_tokens.clear();
  s.row_bits.clear();
  const int32_t text_tokens = TextTokenCount(s);
  // Per root: the old rows of each folded sequence, sorted by the
  // sequence (the trie order).
  std::map<std::vector<int32_t>, std::vector<int32_t>> merged;
  std::vector<int32_t> toks;
  for (int32_t root = 0; root < s.num_roots; ++root) {
    merged.clear();
    for (int32_t r = old_root_offsets[root]; r < old_root_offsets[root + 1]; ++r) {
      const int32_t seq = old_seq[r];
      const int32_t len = fold_len[seq];
      if (len == 0 && s.seq_offsets[seq + 1] > s.seq_offsets[seq]) {
        ++st.rows_deleted;
        continue;
      }
      const int32_t* items = s.seq_data.data() + s.seq_offsets[seq];
      merged[std::vector<int32_t>(items, items + len)].push_back(r);
    }
    for (auto& [items, rows] : merged) {
      auto [it, inserted] = seq_id.emplace(items, static_cast<int32_t>(s.seq_offsets.size()) - 1);
      if (inserted) {
        s.seq_data.insert(s.seq_data.end(), items.begin(), items.end());
        s.seq_offsets.push_back(static_cast<int32_t>(s.seq_data.size()));
      }
      if (rows.size() == 1) {
        // Nothing merged: the row keeps its encoding (AppendRow would choose
        // the same one for the same tokens).
        const int32_t r = rows[0];
        const int32_t off = old_rows.row_offset[r], len = old_rows.row_length[r];
        s.row_seq.push_back(it->second);
        s.row_kind.push_back(old_rows.row_kind[r]);
        s.row_length.push_back(len);
        if (static_cast<RowKind>(old_rows.row_kind[r]) == RowKind::kBitset) {
          s.row_offset.push_back(static_cast<int32_t>(s.row_bits.size()));
          s.row_bits.insert(s.row_bits.end(), old_rows.row_bits.begin() + off,
                            old_rows.row_bits.begin() + off + len);
        } else {
          s.row_offset.push_back(static_cast<int32_t>(s.row_tokens.size()));
          s.row_tokens.insert(s.row_tokens.end(), old_rows.row_tokens.begin() + off,
                              old_rows.row_tokens.begin() + off + len);
        }
        continue;
      }
      toks.clear();
      for (int32_t r : rows) DecodeRow(old_rows, r, &toks);
      std::sort(toks.begin(), toks.end());
      toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
      AppendRow(it->second, toks, text_tokens, &s);
    }
    s.root_row_offsets.push_back(static_cast<int32_t>(s.row_seq.size()));
  }
  // The single-token rows of simulated tokens (no sequence: kept as they are).
  {
    std::unordered_map<int32_t, int32_t> row_of_token;
    for (size_t i = 0; i < s.sim_token.size(); ++i) {
      const int32_t t = s.sim_token[i];
      auto [it, inserted] = row_of_token.emplace(t, static_cast<int32_t>(s.row_seq.size()));
      if (inserted) AppendRow(0, {t}, text_tokens, &s);
      s.sim_row[i] = it->second;
    }
  }
  // Count the folded rows before the sequences are renumbered.
  for (int32_t r = 0; r < static_cast<int32_t>(old_seq.size()); ++r) {
    const int32_t seq = old_seq[r];
    st.proved += fold_len[seq] > 0 && fold_len[seq] < s.seq_offsets[seq + 1] - s.seq_offsets[seq];
  }
  CompactSequences(&s);
  st.rows_after = static_cast<int64_t>(s.row_seq.size());
  st.bytes_after = RowPayloadBytes(s);
  st.steps.push_back({"always legal", st.rows_after, st.bytes_after, st.queries,
                      SecondsSince(t_step)});

  // Interchangeable terminals: reported only.
  if (options.grammar) {
    t_step = std::chrono::steady_clock::now();
    st.interchangeable = InterchangeableClasses(*options.grammar);
    st.steps.push_back({"interchangeable", st.rows_after, st.bytes_after, 0,
                        SecondsSince(t_step)});
  }
  st.seconds = SecondsSince(t0);
  if (stats) *stats = st;
  return Status::Ok();
}

}  // namespace cfgmask
