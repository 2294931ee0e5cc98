// The merge pass on a compiled store: see row_fold.h.
#include "streamline/row_fold.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "maskstore/id_index.h"
#include "maskstore/row_codec.h"
#include "parser/lalr.h"

namespace cfgmask {
namespace {

constexpr int32_t kEmitItem = 0, kHitItem = 1, kTailItem = 2;

// The prover's memo: int32 keys (copied into one arena) to small values,
// indexed by IdIndex; allocation-free look-ups.
class KeyMemo {
 public:
  static constexpr int8_t kUnanswered = 3;  // an entry whose query was cut short
  // The entry of `key`, made (value `init`, *inserted) when absent or
  // unanswered.
  int32_t Entry(const std::vector<int32_t>& key, int8_t init, bool* inserted) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ key.size();
    for (int32_t v : key) h = (h ^ static_cast<uint32_t>(v)) * 0x100000001b3ULL + (h >> 29);
    const int32_t id = index_.FindOrAdd(
        h, values_.size(),
        [&](int32_t e) {
          return hash_[e] == h && length_[e] == key.size() &&
                 std::equal(key.begin(), key.end(), arena_.begin() + offset_[e]);
        },
        [&] {
          hash_.push_back(h);
          offset_.push_back(arena_.size());
          length_.push_back(static_cast<uint32_t>(key.size()));
          arena_.insert(arena_.end(), key.begin(), key.end());
          values_.push_back(init);
        },
        [&](int32_t e) { return hash_[e]; }, inserted);
    if (!*inserted && values_[id] == kUnanswered) {
      values_[id] = init;
      *inserted = true;
    }
    return id;
  }
  int8_t& value(int32_t id) { return values_[id]; }

 private:
  IdIndex index_;
  std::vector<uint64_t> hash_;
  std::vector<size_t> offset_;
  std::vector<uint32_t> length_;
  std::vector<int32_t> arena_;
  std::vector<int8_t> values_;
};

// Unlimited credit exploration over the LALR(1) tables, item by item.
class Prover {
 public:
  Prover(const CompiledStore& s, const StreamlineOptions& o) : s_(s), o_(o) {
    const int32_t n = s.num_states, P = s.num_parse_terminals, N = s.num_nonterminals;
    std::vector<std::vector<int32_t>> edges(n);
    after_.resize(P);
    for (int32_t q = 0; q < n; ++q) {
      for (int32_t t = 0; t < P; ++t) {
        const int32_t a = s.action[static_cast<size_t>(q) * P + t];
        if (a > 0 && a != kAcceptAction) edges[q].push_back(a - 1);
      }
      for (int32_t A = 0; A < N; ++A) {
        const int32_t g = s.goto_table[static_cast<size_t>(q) * N + A];
        if (g >= 0) edges[q].push_back(g);
      }
    }
    std::vector<bool> reachable(n, false);
    std::vector<int32_t> work{s.start_state};
    reachable[s.start_state] = true;
    while (!work.empty()) {
      const int32_t q = work.back();
      work.pop_back();
      for (int32_t w : edges[q])
        if (!reachable[w]) reachable[w] = true, work.push_back(w);
    }
    pred_.resize(n);
    for (int32_t q = 0; q < n; ++q) {
      if (!reachable[q]) continue;
      for (int32_t w : edges[q])
        if (pred_[w].empty() || pred_[w].back() != q) pred_[w].push_back(q);
      for (int32_t t = 0; t < P; ++t) {
        const int32_t a = s.action[static_cast<size_t>(q) * P + t];
        if (a > 0 && a != kAcceptAction) after_[t].push_back(a - 1);
      }
    }
    for (auto& v : after_) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
  }

  // Does every configuration in which the Emit `emit` was just accepted
  // accept the items r[0..n)?
  bool ProveAfterEmit(int32_t emit, const int32_t* r, int32_t n) {
    possible_ = false;
    std::vector<int32_t> types;
    int32_t base_slot;
    if (!Start(emit, r, n, &types, &base_slot)) return false;  // the parser state is not known
    for (int32_t type : types) {
      if (type == s_.indenter_nl && s_.indenter_nl >= 0) return false;
      for (int32_t k : after_[type]) {
        std::vector<int32_t> K{k};
        if (!Proved(r, n, 0, K, base_slot)) return false;
      }
    }
    return true;
  }

  // The dual (is_never_legal on items): can any configuration in which the
  // Emit `emit` was just accepted accept r[0..n)?  Same exploration, with
  // "some branch" where the proof asks "every branch"; what it does not know
  // counts as possible.  False only when no configuration can.
  bool PossibleAfterEmit(int32_t emit, const int32_t* r, int32_t n) {
    possible_ = true;
    std::vector<int32_t> types;
    int32_t base_slot;
    if (!Start(emit, r, n, &types, &base_slot)) return true;  // the parser state is not known
    for (int32_t type : types) {
      if (type == s_.indenter_nl && s_.indenter_nl >= 0) return true;
      for (int32_t k : after_[type]) {
        std::vector<int32_t> K{k};
        if (Proved(r, n, 0, K, base_slot)) return true;
      }
    }
    return false;
  }
  bool exceeded() const { return exceeded_; }

 private:
  // A query's start: the terminals the Emit can be fed as (itself or a
  // keyword it is retyped to) and the first slot opened inside r (Hits of
  // earlier slots are not known).  False when the Emit is %ignore'd: the
  // parser state it leaves is not known.
  bool Start(int32_t emit, const int32_t* r, int32_t n, std::vector<int32_t>* types,
             int32_t* base_slot) {
    steps_ = 0;
    exceeded_ = false;
    const int32_t t = s_.item_terminal[emit];
    if (s_.terminal_ignored[t]) return false;
    types->assign(1, t);
    const int32_t f = s_.item_full[emit];
    for (int32_t i = s_.set_offsets[f]; i < s_.set_offsets[f + 1]; ++i)
      types->push_back(s_.set_data[i]);
    *base_slot = INT32_MAX;
    for (int32_t i = 0; i < n; ++i)
      if (s_.item_kind[r[i]] == kEmitItem) {
        *base_slot = s_.item_slot[r[i]];
        break;
      }
    return true;
  }

  bool InAlt(int32_t state, int32_t t) const {
    return (s_.scanner_alt[static_cast<size_t>(state) * s_.scanner_words + t / 64] >> (t & 63)) & 1;
  }
  bool InTerms(int32_t state, int32_t t) const {
    return (s_.scanner_terms[static_cast<size_t>(state) * s_.scanner_words + t / 64] >> (t & 63)) &
           1;
  }

  // Feeds terminal t to every configuration whose known stack top is K
  // (bottom first), then proves items r[next..n) from each resulting known
  // stack (next < 0: nothing more to prove).  True if every configuration
  // shifts t and every continuation succeeds.  Memoised like Proved: the
  // branches of a borrowing reduction meet again.
  bool Feed(const int32_t* r, int32_t n, int32_t next, std::vector<int32_t> K, int32_t t,
            int32_t base_slot) {
    const int32_t P = s_.num_parse_terminals, N = s_.num_nonterminals;
    for (;;) {
      if (++steps_ > o_.max_steps) {
        exceeded_ = true;
        return possible_;
      }
      const int32_t a = s_.action[static_cast<size_t>(K.back()) * P + t];
      if (a == 0) return false;
      if (a == kAcceptAction) return false;  // only $END is accepted; never fed here
      if (a > 0) {
        K.push_back(a - 1);
        if (static_cast<int32_t>(K.size()) > o_.max_stack) K.erase(K.begin());
        return next < 0 || Proved(r, n, next, K, base_slot);
      }
      const int32_t rule = -(a + 1);
      const int32_t len = s_.rule_length[rule], lhs = s_.rule_lhs[rule];
      if (len < static_cast<int32_t>(K.size())) {
        K.resize(K.size() - len);
        const int32_t g = s_.goto_table[static_cast<size_t>(K.back()) * N + lhs];
        if (g < 0) return false;
        K.push_back(g);
        continue;
      }
      // Pops below what is known: the new top is any state with a path of
      // the right length to the deepest known one; every one must succeed.
      // States without a goto on lhs cannot be under a real stack.
      std::vector<int32_t> frontier{K[0]};
      for (int32_t d = 0; d < len - static_cast<int32_t>(K.size()) + 1; ++d) {
        std::vector<int32_t> up;
        for (int32_t q : frontier)
          for (int32_t p : pred_[q]) up.push_back(p);
        std::sort(up.begin(), up.end());
        up.erase(std::unique(up.begin(), up.end()), up.end());
        frontier.swap(up);
      }
      for (int32_t p : frontier) {
        const int32_t g = s_.goto_table[static_cast<size_t>(p) * N + lhs];
        if (g < 0) continue;
        if (FeedMemo(r, n, next, {p, g}, t, base_slot) == possible_) return possible_;
      }
      return !possible_;
    }
  }

  bool FeedMemo(const int32_t* r, int32_t n, int32_t next, const std::vector<int32_t>& K,
                int32_t t, int32_t base_slot) {
    Key(r, n, next < 0 ? n : next, K, base_slot);
    key_.push_back(-2);
    key_.push_back(t);
    return Memoised([&] { return Feed(r, n, next, K, t, base_slot); });
  }

  // A node met again while it is being proved (a cycle of borrowing
  // reductions) counts as not proved: conservative, and a "true" never rests
  // on it, so both answers may be cached.
  // The key is in key_ (Key()); the memo copies it before compute() runs.
  // A query cut short (exceeded_) leaves its key unanswered.
  template <class F>
  bool Memoised(const F& compute) {
    KeyMemo& memo = memo_[possible_];
    bool inserted;
    const int32_t id = memo.Entry(key_, kInProgress, &inserted);
    if (!inserted) {
      const int8_t v = memo.value(id);
      return v == kInProgress ? possible_ : v == 1;
    }
    const bool result = compute();
    memo.value(id) = exceeded_ ? KeyMemo::kUnanswered : (result ? 1 : 0);
    return result;
  }

  void Key(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
           int32_t base_slot) {
    key_.clear();
    key_.push_back(base_slot);
    key_.push_back(static_cast<int32_t>(K.size()));
    key_.insert(key_.end(), K.begin(), K.end());
    key_.insert(key_.end(), r + pos, r + n);
  }

  bool AcceptsAll(const std::vector<int32_t>& K, int32_t t) {
    return FeedMemo(nullptr, 0, -1, K, t, 0);
  }

  // Runtime's Sim::TailOk, proved for every configuration: some terminal of
  // the tail that the known top state scans, unblocked, is taken.
  bool TailProved(const std::vector<int32_t>& K, int32_t item) {
    const int32_t state = K.back();
    const int32_t alive = s_.item_blockers[item], matched = s_.item_full[item];
    for (int32_t i = s_.set_offsets[alive]; i < s_.set_offsets[alive + 1]; ++i) {
      const int32_t t = s_.set_data[i];
      if (!InAlt(state, t)) continue;
      bool blocked = false;
      for (int32_t j = s_.set_offsets[matched]; j < s_.set_offsets[matched + 1] && !blocked; ++j) {
        const int32_t u = s_.set_data[j];
        blocked = s_.terminal_rank[u] < s_.terminal_rank[t] && InAlt(state, u);
      }
      if (blocked) continue;
      if (s_.terminal_ignored[t]) return true;
      if (t == s_.indenter_nl && s_.indenter_nl >= 0) {
        // Inside brackets the indenter drops it: unknown here.
        if (possible_ || AcceptsAll(K, t)) return true;
        continue;
      }
      if (AcceptsAll(K, t)) return true;
      // Retyping to a keyword k needs the text so far to be a prefix of k.
      for (int32_t j = s_.unless_offsets[t]; j < s_.unless_offsets[t + 1]; ++j) {
        const int32_t k = s_.unless_data[j];
        if (InTerms(state, k) && s_.SetContains(alive, k) && AcceptsAll(K, k)) return true;
      }
    }
    return false;
  }

  bool Proved(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
              int32_t base_slot) {
    if (pos == n) return true;
    Key(r, n, pos, K, base_slot);
    return Memoised([&] { return ProvedUncached(r, n, pos, K, base_slot); });
  }

  bool ProvedUncached(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
                      int32_t base_slot) {
    const int32_t item = r[pos];
    const int32_t t = s_.item_terminal[item];
    switch (s_.item_kind[item]) {
      case kHitItem:
        // Checked where its slot was opened, if that was inside R.
        // Its scanner is unknown if its slot was opened before R.
        return (possible_ || s_.item_slot[item] >= base_slot) && Proved(r, n, pos + 1, K, base_slot);
      case kTailItem:
        return TailProved(K, item) && Proved(r, n, pos + 1, K, base_slot);
      default:
        break;
    }
    const int32_t state = K.back();
    if (!InAlt(state, t)) return false;
    const int32_t b = s_.item_blockers[item];
    for (int32_t i = s_.set_offsets[b]; i < s_.set_offsets[b + 1]; ++i)
      if (InAlt(state, s_.set_data[i])) return false;
    for (int32_t i = pos + 1; i < n; ++i) {
      const int32_t h = r[i];
      if (s_.item_kind[h] == kHitItem && s_.item_slot[h] == s_.item_slot[item] &&
          InAlt(state, s_.item_terminal[h]))
        return false;
    }
    if (s_.terminal_ignored[t]) return Proved(r, n, pos + 1, K, base_slot);
    int32_t type = t, best_rank = INT32_MAX;
    const int32_t f = s_.item_full[item];
    for (int32_t i = s_.set_offsets[f]; i < s_.set_offsets[f + 1]; ++i) {
      const int32_t k = s_.set_data[i];
      if (InTerms(state, k) && s_.terminal_rank[k] < best_rank) {
        best_rank = s_.terminal_rank[k];
        type = k;
      }
    }
    if (type == s_.indenter_nl && s_.indenter_nl >= 0) return possible_;  // indenter stack unknown
    return Feed(r, n, pos + 1, K, type, base_slot);
  }

  const CompiledStore& s_;
  const StreamlineOptions& o_;
  std::vector<std::vector<int32_t>> pred_, after_;
  static constexpr int8_t kInProgress = 2;
  KeyMemo memo_[2];  // [possible_]
  std::vector<int32_t> key_;
  int64_t steps_ = 0;
  bool exceeded_ = false;
  bool possible_ = false;  // which question: every configuration (false) or some (true)
};

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    size_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return h;
  }
};

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
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> seq_id;
  seq_id.reserve(num_seqs * 2);
  for (int32_t q = 0; q < num_seqs; ++q)
    seq_id.emplace(std::vector<int32_t>(s.seq_data.begin() + s.seq_offsets[q],
                                        s.seq_data.begin() + s.seq_offsets[q + 1]),
                   q);

  // Per sequence: the length of the prefix it folds into (-1 = not yet known).
  std::vector<int32_t> fold_len(num_seqs, -1);
  Prover prover(s, options);
  std::unordered_map<std::vector<int32_t>, bool, VecHash> query_cache;
  std::unordered_map<std::vector<int32_t>, bool, VecHash> possible_cache;
  // 0 = never accepted by any hypothesis (the row is deleted).
  auto fold_of = [&](int32_t seq) -> int32_t {
    if (fold_len[seq] >= 0) return fold_len[seq];
    const int32_t* items = s.seq_data.data() + s.seq_offsets[seq];
    const int32_t n = s.seq_offsets[seq + 1] - s.seq_offsets[seq];
    for (int32_t j = 0; options.delete_never && j + 1 < n; ++j) {
      if (s.item_kind[items[j]] != kEmitItem) continue;
      std::vector<int32_t> q(items + j, items + n);
      auto it = possible_cache.find(q);
      bool possible;
      if (it != possible_cache.end()) {
        ++st.cache_hits;
        possible = it->second;
      } else {
        ++st.never_queries;
        possible = prover.PossibleAfterEmit(items[j], items + j + 1, n - j - 1);
        st.budget_exceeded += prover.exceeded();
        possible_cache.emplace(std::move(q), possible);
      }
      if (!possible) return fold_len[seq] = 0;
    }
    // Fold into the shortest proved prefix, then fold that prefix again
    // (each step is exact, so their chain is).
    int32_t len = n;
    for (bool again = options.fold; again;) {
      again = false;
      for (int32_t j = 0; j + 1 < len; ++j) {
        if (s.item_kind[items[j]] != kEmitItem) continue;
        std::vector<int32_t> q(items + j, items + len);
        auto it = query_cache.find(q);
        bool ok;
        if (it != query_cache.end()) {
          ++st.cache_hits;
          ok = it->second;
        } else {
          ++st.queries;
          ok = prover.ProveAfterEmit(items[j], items + j + 1, len - j - 1);
          st.budget_exceeded += prover.exceeded();
          query_cache.emplace(std::move(q), ok);
        }
        if (ok) {
          len = j + 1;
          again = true;
          break;
        }
      }
    }
    return fold_len[seq] = len;
  };

  std::vector<int32_t> old_root_offsets = std::move(s.root_row_offsets);
  std::vector<int32_t> old_seq = std::move(s.row_seq), old_kind = std::move(s.row_kind),
                       old_offset = std::move(s.row_offset), old_length = std::move(s.row_length),
                       old_tokens = std::move(s.row_tokens);
  std::vector<uint32_t> old_bits = std::move(s.row_bits);
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
      const int32_t len = fold_of(seq);
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
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats) *stats = st;
  return Status::Ok();
}

}  // namespace cfgmask
