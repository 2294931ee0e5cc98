// The streamlining pass: see streamline.h.
#include "streamline/streamline.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <chrono>
#include <map>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "maskstore/id_index.h"
#include "maskstore/row_codec.h"
#include "streamline/always_legal.h"
#include "streamline/exploration.h"
#include "streamline/interchangeable.h"
#include "streamline/never_legal.h"

namespace cfgmask {
namespace {

// The store's item sequences by content: an index over its own arrays (no
// copy of them, no allocation per sequence).  Intern gives the id of a
// sequence, adding it to the store when new.
class SequenceIndex {
 public:
  explicit SequenceIndex(CompiledStore* s) : s_(s) {
    const int32_t n = static_cast<int32_t>(s->seq_offsets.size()) - 1;
    hash_.reserve(n);
    for (int32_t q = 0; q < n; ++q) {
      const std::span<const int32_t> v = Seq(q);
      const uint64_t h = SequenceHash()(v);
      hash_.push_back(h);
      // An earlier equal sequence keeps its id (none in practice).
      Find(v, h, q, [] {});
    }
  }
  int32_t Intern(std::span<const int32_t> items) {
    const uint64_t h = SequenceHash()(items);
    return Find(items, h, static_cast<int32_t>(hash_.size()), [&] {
      hash_.push_back(h);
      s_->seq_data.append(items.begin(), items.end());
      s_->seq_offsets.push_back(static_cast<int32_t>(s_->seq_data.size()));
    });
  }

 private:
  std::span<const int32_t> Seq(int32_t q) const {
    return {s_->seq_data.data() + s_->seq_offsets[q],
            static_cast<size_t>(s_->seq_offsets[q + 1] - s_->seq_offsets[q])};
  }
  template <class Add>
  int32_t Find(std::span<const int32_t> v, uint64_t h, int32_t count, const Add& add) {
    return index_.FindOrAdd(
        h, count,
        [&](int32_t id) {
          if (hash_[id] != h) return false;
          const std::span<const int32_t> w = Seq(id);
          return w.size() == v.size() && std::equal(w.begin(), w.end(), v.begin());
        },
        add, [&](int32_t id) { return hash_[id]; });
  }
  CompiledStore* s_;
  std::vector<uint64_t> hash_;
  IdIndex index_;
};

// Moves s's rows (sequence ids, kinds, offsets, lengths, payloads) into a
// store of their own, with what DecodeRow needs; s is left with none.
CompiledStore TakeRows(CompiledStore* s) {
  CompiledStore old;
  old.vocab_size = s->vocab_size;
  old.token_special = s->token_special;
  old.row_seq = std::move(s->row_seq);
  old.row_kind = std::move(s->row_kind);
  old.row_offset = std::move(s->row_offset);
  old.row_length = std::move(s->row_length);
  old.row_tokens = std::move(s->row_tokens);
  old.row_bits = std::move(s->row_bits);
  return old;
}

// Appends row r of `old` to s under sequence `seq`, in its own encoding.
void CopyRow(const CompiledStore& old, int32_t r, int32_t seq, CompiledStore* s) {
  const int32_t off = old.row_offset[r], len = old.row_length[r];
  s->row_seq.push_back(seq);
  s->row_kind.push_back(old.row_kind[r]);
  s->row_length.push_back(len);
  if (static_cast<RowKind>(old.row_kind[r]) == RowKind::kBitset) {
    s->row_offset.push_back(static_cast<int32_t>(s->row_bits.size()));
    s->row_bits.append(old.row_bits.begin() + off, old.row_bits.begin() + off + len);
  } else {
    s->row_offset.push_back(static_cast<int32_t>(s->row_tokens.size()));
    s->row_tokens.append(old.row_tokens.begin() + off, old.row_tokens.begin() + off + len);
  }
}

// Appends to s one row under sequence `seq`: the union of the token sets of
// rows `rows` of `old` (`toks` is scratch).
void AppendUnionRow(const CompiledStore& old, const std::vector<int32_t>& rows, int32_t seq,
                    int32_t text_tokens, std::vector<int32_t>* toks, CompiledStore* s) {
  toks->clear();
  for (int32_t r : rows) DecodeRow(old, r, toks);
  std::sort(toks->begin(), toks->end());
  toks->erase(std::unique(toks->begin(), toks->end()), toks->end());
  AppendRow(seq, *toks, text_tokens, s);
}

// A thread running `work`, or none (not joinable) when no thread can be
// had, e.g. under the compile's memory limit, which counts a thread's stack:
// the caller then does the work itself.
template <class Work>
std::thread TryThread(const Work& work) {
  try {
    return std::thread(work);
  } catch (const std::system_error&) {
    return std::thread();
  }
}

// Runs `work` on `threads` threads (this one among them), or on as many as
// can be had.
template <class Work>
void RunWorkers(int32_t threads, const Work& work) {
  std::vector<std::thread> helpers;
  for (int32_t i = 1; i < threads; ++i) {
    std::thread t = TryThread(work);
    if (!t.joinable()) break;
    helpers.push_back(std::move(t));
  }
  work();
  for (std::thread& t : helpers) t.join();
}

int32_t ThreadCount(int32_t requested) {
  if (requested > 0) return requested;
  return std::max<int32_t>(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
}

// The rows of one root after a rewrite: per new row its items, and the rows
// themselves (row_seq: the index into items).
struct RewrittenRoot {
  std::vector<std::vector<int32_t>> items;
  CompiledStore rows;
  int64_t dropped = 0;
};

// Rewrites the rows of every root.  `group(root, &merged, &dropped)` maps the
// new item sequence of each kept row of the root to the old rows that merge
// into it (ordered by items: the runtime walks a root's rows as a trie); one
// row is copied in its own encoding, several are ORed.  Roots go in blocks,
// in parallel within a block, and are appended in root order with their
// sequences and payloads interned (`rows`, over s), so the store is the same
// for any thread count.  Returns the rows `group` dropped.
template <class Group>
int64_t RewriteRootRows(const CompiledStore& old, const std::vector<int32_t>& old_offsets,
                        int32_t threads, const Group& group, SequenceIndex* seq_id,
                        RowPayloads* rows, CompiledStore* s) {
  const int32_t text_tokens = TextTokenCount(*s);
  const StoreArray<uint8_t>& special = s->token_special;
  const uint8_t* special_data = special.data();
  const size_t special_size = special.size();
  constexpr int32_t kBlock = 256;
  const int32_t num_roots = static_cast<int32_t>(old_offsets.size()) - 1;
  int64_t dropped = 0;
  std::vector<RewrittenRoot> out;
  for (int32_t b0 = 0; b0 < num_roots; b0 += kBlock) {
    const int32_t b1 = std::min(num_roots, b0 + kBlock);
    out.clear();
    out.resize(b1 - b0);
    std::atomic<int32_t> next{b0};
    RunWorkers(threads, [&] {
      std::map<std::vector<int32_t>, std::vector<int32_t>> merged;
      std::vector<int32_t> toks;
      for (int32_t g; (g = next.fetch_add(1)) < b1;) {
        RewrittenRoot& o = out[g - b0];
        o.rows.vocab_size = s->vocab_size;
        o.rows.token_special = StoreArray<uint8_t>::View(special_data, special_size);
        merged.clear();
        group(g, &merged, &o.dropped);
        for (auto& [items, rows] : merged) {
          const int32_t local = static_cast<int32_t>(o.items.size());
          o.items.push_back(items);
          if (rows.size() == 1) {
            CopyRow(old, rows[0], local, &o.rows);
          } else {
            AppendUnionRow(old, rows, local, text_tokens, &toks, &o.rows);
          }
        }
      }
    });
    for (RewrittenRoot& o : out) {
      dropped += o.dropped;
      for (size_t i = 0; i < o.items.size(); ++i) {
        rows->Copy(o.rows, static_cast<int32_t>(i), seq_id->Intern(o.items[i]));
      }
      s->root_row_offsets.push_back(static_cast<int32_t>(s->row_seq.size()));
    }
  }
  return dropped;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The seed's keys (StreamlineStep::keys): per lexer state at a token
// boundary, the distinct terminal sequences of its group's rows, leaving out
// the rows of sequences marked in `dead` (when given).  As TerminalSequenceKeys
// (maskstore/row_codec.h), counted per state rather than per group.
int64_t SeedKeys(const CompiledStore& s, const std::vector<int8_t>* dead) {
  std::vector<int64_t> states_of(s.num_roots, 0);
  for (int32_t root : s.root_index)
    if (root >= 0) ++states_of[root];
  // Each sequence's key as a dense id, made once per sequence; a group's
  // distinct keys are counted by marking each key id with the group.
  const int32_t num_seqs = static_cast<int32_t>(s.seq_offsets.size()) - 1;
  std::vector<int32_t> key_id(std::max(num_seqs, 0), -1), mark;
  // The distinct keys, in one arena (no allocation per key).
  std::vector<int32_t> key_data, key_offset{0};
  std::vector<uint64_t> key_hash;
  IdIndex ids;
  int64_t total = 0;
  std::vector<int32_t> key;
  for (int32_t root = 0; root < s.num_roots; ++root) {
    int64_t keys = 0;
    for (int32_t r = s.root_row_offsets[root]; r < s.root_row_offsets[root + 1]; ++r) {
      const int32_t seq = s.row_seq[r];
      if (dead && (*dead)[seq] > 0) continue;
      if (key_id[seq] < 0) {
        TerminalSequenceKey(s, seq, &key);
        const uint64_t h = SequenceHash()(key);
        key_id[seq] = ids.FindOrAdd(
            h, mark.size(),
            [&](int32_t id) {
              return key_hash[id] == h &&
                     std::equal(key.begin(), key.end(), key_data.begin() + key_offset[id],
                                key_data.begin() + key_offset[id + 1]);
            },
            [&] {
              key_data.insert(key_data.end(), key.begin(), key.end());
              key_offset.push_back(static_cast<int32_t>(key_data.size()));
              key_hash.push_back(h);
              mark.push_back(-1);
            },
            [&](int32_t id) { return key_hash[id]; });
      }
      if (mark[key_id[seq]] != root) mark[key_id[seq]] = root, ++keys;
    }
    total += keys * states_of[root];
  }
  return total;
}

// The payloads a store holds (StreamlineStep::payloads): its rows'
// distinct (array, offset, length) references, leaving out the rows of
// sequences marked in `dead` (when given).  The store's payloads are
// interned (RowPayloads), so equal references are equal payloads.
int64_t StoredPayloads(const CompiledStore& s, const std::vector<int8_t>* dead) {
  std::unordered_set<uint64_t> refs;
  const int32_t root_rows = s.root_row_offsets.empty() ? 0 : s.root_row_offsets[s.num_roots];
  for (int32_t r = 0; r < static_cast<int32_t>(s.row_seq.size()); ++r) {
    if (dead && r < root_rows && (*dead)[s.row_seq[r]] > 0) continue;
    const uint64_t bits = s.row_kind[r] == static_cast<int32_t>(RowKind::kBitset);
    refs.insert(bits << 62 | static_cast<uint64_t>(static_cast<uint32_t>(s.row_offset[r])) << 24 |
                static_cast<uint32_t>(s.row_length[r]));
  }
  return static_cast<int64_t>(refs.size());
}

// Lexing conditions (streamline.h, step 2): each row's items replaced by
// items that every hypothesis checks the same way (HypothesisParser::Item,
// maskstore/hypothesis_parser.h), with what no scanner can ever make a
// difference dropped:
//  - a Hit whose terminal is in no scanner's alternation always passes (its
//    slot's bits are unions of alternations): dropped;
//  - an Emit of t is only checked further in states whose alternation has t:
//    a blocker never in such a state's alternation cannot fail it, a
//    full-match string never in such a state's terminals cannot retype it,
//    and the column is read only when t or a retyping is the indenter's
//    newline.
// Rows of a group whose sequences become equal merge (their token sets ORed).
// Returns the number of items changed.
int64_t CanonicalLexingConditions(CompiledStore* store, int32_t threads) {
  CompiledStore& s = *store;
  const int32_t W = s.scanner_words, T = s.num_terminals;
  auto bit = [&](const StoreArray<uint64_t>& v, size_t row, int32_t t) {
    return (v[row * W + t / 64] >> (t & 63)) & 1;
  };
  // Per terminal t: the union of the alternations and of the terminal sets of
  // the states whose alternation has t; and the union of every alternation.
  std::vector<uint64_t> alt_with(static_cast<size_t>(T) * W, 0), terms_with(alt_with),
      any_alt(W, 0);
  for (int32_t st = 0; st < s.num_states; ++st) {
    for (int32_t w = 0; w < W; ++w) any_alt[w] |= s.scanner_alt[static_cast<size_t>(st) * W + w];
    for (int32_t t = 0; t < T; ++t) {
      if (!bit(s.scanner_alt, st, t)) continue;
      for (int32_t w = 0; w < W; ++w) {
        alt_with[static_cast<size_t>(t) * W + w] |= s.scanner_alt[static_cast<size_t>(st) * W + w];
        terms_with[static_cast<size_t>(t) * W + w] |= s.scanner_terms[static_cast<size_t>(st) * W + w];
      }
    }
  }
  // Interned sets and items, the store's own first.
  std::map<std::vector<int32_t>, int32_t> set_id;
  const int32_t num_sets = static_cast<int32_t>(s.set_offsets.size()) - 1;
  for (int32_t i = 0; i < num_sets; ++i)
    set_id.emplace(std::vector<int32_t>(s.set_data.begin() + s.set_offsets[i],
                                        s.set_data.begin() + s.set_offsets[i + 1]), i);
  auto intern_set = [&](const std::vector<int32_t>& v) {
    auto [it, inserted] = set_id.emplace(v, static_cast<int32_t>(s.set_offsets.size()) - 1);
    if (inserted) {
      s.set_data.insert(s.set_data.end(), v.begin(), v.end());
      s.set_offsets.push_back(static_cast<int32_t>(s.set_data.size()));
    }
    return it->second;
  };
  using Key = std::array<int32_t, 7>;
  std::map<Key, int32_t> item_id;
  const int32_t num_items = static_cast<int32_t>(s.item_kind.size());
  auto key_of = [&](int32_t i) {
    return Key{s.item_kind[i], s.item_terminal[i], s.item_blockers[i], s.item_full[i],
               s.item_col_abs[i], s.item_col[i], s.item_slot[i]};
  };
  for (int32_t i = 0; i < num_items; ++i) item_id.emplace(key_of(i), i);
  std::vector<int32_t> canon(num_items);  // -1: dropped
  int64_t changed = 0;
  std::vector<int32_t> v;
  for (int32_t i = 0; i < num_items; ++i) {
    const int32_t t = s.item_terminal[i];
    canon[i] = i;
    if (s.KindOf(i) == ItemKind::kHit) {
      if (!((any_alt[t / 64] >> (t & 63)) & 1)) canon[i] = -1, ++changed;
      continue;
    }
    if (s.KindOf(i) == ItemKind::kTail) continue;  // kept
    Key k = key_of(i);
    v.clear();
    for (int32_t j = s.set_offsets[k[2]]; j < s.set_offsets[k[2] + 1]; ++j) {
      const int32_t b = s.set_data[j];
      if (bit(alt_with, t, b)) v.push_back(b);
    }
    k[2] = intern_set(v);
    v.clear();
    bool newline = t == s.indenter_nl;
    for (int32_t j = s.set_offsets[k[3]]; j < s.set_offsets[k[3] + 1]; ++j) {
      const int32_t f = s.set_data[j];
      if (bit(terms_with, t, f)) v.push_back(f), newline |= f == s.indenter_nl;
    }
    k[3] = intern_set(v);
    if (s.indenter_nl < 0 || !newline) k[4] = 0, k[5] = 0;
    if (k == key_of(i)) continue;
    ++changed;
    auto [it, inserted] = item_id.emplace(k, static_cast<int32_t>(s.item_kind.size()));
    if (inserted) {
      s.item_kind.push_back(k[0]);
      s.item_terminal.push_back(k[1]);
      s.item_blockers.push_back(k[2]);
      s.item_full.push_back(k[3]);
      s.item_col_abs.push_back(k[4]);
      s.item_col.push_back(k[5]);
      s.item_slot.push_back(k[6]);
    }
    canon[i] = it->second;
  }
  if (changed == 0) return 0;
  // Rewrite the rows of every group, merging equal sequences.
  SequenceIndex seq_id(&s);
  const CompiledStore old = TakeRows(&s);
  const std::vector<int32_t> old_offsets = s.root_row_offsets.Release();
  s.root_row_offsets.assign(1, 0);
  RowPayloads payloads(&s);
  std::vector<int32_t> new_row(old.row_seq.size(), -1);
  auto copy_row = [&](int32_t r, int32_t seq) {
    new_row[r] = static_cast<int32_t>(s.row_seq.size());
    payloads.Copy(old, r, seq);
  };
  const CompiledStore& cs = s;  // read by the workers while s is not written
  RewriteRootRows(
      old, old_offsets, threads,
      [&](int32_t g, std::map<std::vector<int32_t>, std::vector<int32_t>>* merged, int64_t*) {
        std::vector<int32_t> v;
        for (int32_t r = old_offsets[g]; r < old_offsets[g + 1]; ++r) {
          const int32_t seq = old.row_seq[r];
          v.clear();
          for (int32_t j = cs.seq_offsets[seq]; j < cs.seq_offsets[seq + 1]; ++j)
            if (canon[cs.seq_data[j]] >= 0) v.push_back(canon[cs.seq_data[j]]);
          (*merged)[v].push_back(r);
        }
      },
      &seq_id, &payloads, &s);
  // The rows of no group (simulated tokens): kept, renumbered.
  for (int32_t r = old_offsets[s.num_roots]; r < static_cast<int32_t>(old.row_seq.size()); ++r)
    copy_row(r, old.row_seq[r]);
  for (int32_t& r : s.sim_row) r = new_row[r];
  CompactSequences(&s);
  return changed;
}

// Row r of `s` and row r2 of `t`: the same sequence and the same payload.
bool SameRow(const CompiledStore& s, int32_t r, const CompiledStore& t, int32_t r2) {
  if (s.row_seq[r] != t.row_seq[r2] || s.row_kind[r] != t.row_kind[r2] ||
      s.row_length[r] != t.row_length[r2]) {
    return false;
  }
  const int32_t len = s.row_length[r];
  if (static_cast<RowKind>(s.row_kind[r]) == RowKind::kBitset) {
    return std::equal(s.row_bits.begin() + s.row_offset[r],
                      s.row_bits.begin() + s.row_offset[r] + len,
                      t.row_bits.begin() + t.row_offset[r2]);
  }
  return std::equal(s.row_tokens.begin() + s.row_offset[r],
                    s.row_tokens.begin() + s.row_offset[r] + len,
                    t.row_tokens.begin() + t.row_offset[r2]);
}

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// Shared row groups (streamline.h, step 5): lexer states whose groups hold
// equal rows in the same order and the same simulated tokens (whose rows
// hold the same single token) point to one group.  Returns the groups merged.
int32_t ShareRowGroups(CompiledStore* store) {
  CompiledStore& s = *store;
  const int32_t R = s.num_roots;
  const bool sims = !s.root_sim_offsets.empty();
  auto group_hash = [&](int32_t g) {
    uint64_t h = Mix(0, s.root_row_offsets[g + 1] - s.root_row_offsets[g]);
    for (int32_t r = s.root_row_offsets[g]; r < s.root_row_offsets[g + 1]; ++r) {
      h = Mix(h, s.row_seq[r]);
      h = Mix(h, s.row_kind[r]);
      h = Mix(h, s.row_length[r]);
      const int32_t off = s.row_offset[r], len = s.row_length[r];
      if (static_cast<RowKind>(s.row_kind[r]) == RowKind::kBitset) {
        for (int32_t i = 0; i < len; ++i) h = Mix(h, s.row_bits[off + i]);
      } else {
        for (int32_t i = 0; i < len; ++i) h = Mix(h, s.row_tokens[off + i]);
      }
    }
    if (sims) {
      for (int32_t i = s.root_sim_offsets[g]; i < s.root_sim_offsets[g + 1]; ++i)
        h = Mix(h, s.sim_token[i]);
    }
    return h;
  };
  auto same_group = [&](int32_t a, int32_t b) {
    const int32_t n = s.root_row_offsets[a + 1] - s.root_row_offsets[a];
    if (n != s.root_row_offsets[b + 1] - s.root_row_offsets[b]) return false;
    for (int32_t i = 0; i < n; ++i) {
      if (!SameRow(s, s.root_row_offsets[a] + i, s, s.root_row_offsets[b] + i)) return false;
    }
    if (!sims) return true;
    const int32_t m = s.root_sim_offsets[a + 1] - s.root_sim_offsets[a];
    if (m != s.root_sim_offsets[b + 1] - s.root_sim_offsets[b]) return false;
    for (int32_t i = 0; i < m; ++i) {
      // The rows of simulated tokens hold the token alone, so the token decides.
      if (s.sim_token[s.root_sim_offsets[a] + i] != s.sim_token[s.root_sim_offsets[b] + i])
        return false;
    }
    return true;
  };
  std::unordered_map<uint64_t, std::vector<int32_t>> by_hash;
  std::vector<int32_t> canon(R);
  int32_t merged = 0;
  for (int32_t g = 0; g < R; ++g) {
    auto& bucket = by_hash[group_hash(g)];
    canon[g] = g;
    for (int32_t h : bucket) {
      if (same_group(h, g)) {
        canon[g] = h;
        break;
      }
    }
    if (canon[g] == g) bucket.push_back(g);
    else ++merged;
  }
  if (merged == 0) return 0;
  // Rebuild: the kept groups in order, then the rows of no group (the
  // simulated tokens' rows).
  const CompiledStore old = TakeRows(&s);
  const std::vector<int32_t> old_offsets = s.root_row_offsets.Release();
  const std::vector<int32_t> old_sim_offsets = s.root_sim_offsets.Release();
  const std::vector<int32_t> old_sim_token = s.sim_token.Release();
  const std::vector<int32_t> old_sim_row = s.sim_row.Release();
  s.root_row_offsets.assign(1, 0);
  s.root_sim_offsets.clear();
  if (sims) s.root_sim_offsets.assign(1, 0);
  s.sim_token.clear();
  s.sim_row.clear();
  std::vector<int32_t> new_id(R, -1), new_row(old.row_seq.size(), -1);
  RowPayloads payloads(&s);
  auto copy_row = [&](int32_t r) {
    new_row[r] = static_cast<int32_t>(s.row_seq.size());
    payloads.Copy(old, r, old.row_seq[r]);
  };
  int32_t kept = 0;
  for (int32_t g = 0; g < R; ++g) {
    if (canon[g] != g) continue;
    new_id[g] = kept++;
    for (int32_t r = old_offsets[g]; r < old_offsets[g + 1]; ++r) copy_row(r);
    s.root_row_offsets.push_back(static_cast<int32_t>(s.row_seq.size()));
  }
  for (int32_t r = old_offsets[R]; r < static_cast<int32_t>(old.row_seq.size()); ++r) copy_row(r);
  if (sims) {
    for (int32_t g = 0; g < R; ++g) {
      if (canon[g] != g) continue;
      for (int32_t i = old_sim_offsets[g]; i < old_sim_offsets[g + 1]; ++i) {
        s.sim_token.push_back(old_sim_token[i]);
        s.sim_row.push_back(new_row[old_sim_row[i]]);
      }
      s.root_sim_offsets.push_back(static_cast<int32_t>(s.sim_token.size()));
    }
  }
  s.num_roots = kept;
  for (int32_t& root : s.root_index)
    if (root >= 0) root = new_id[canon[root]];
  return merged;
}

}  // namespace

Status StreamlineStore(CompiledStore* store, const StreamlineOptions& options,
                       StreamlineStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  CompiledStore& s = *store;
  StreamlineStats st;
  st.rows_before = static_cast<int64_t>(s.row_seq.size());
  st.bytes_before = RowPayloadBytes(s);

  st.steps.push_back({"every lexing", st.rows_before, st.bytes_before, SeedKeys(s, nullptr),
                      s.num_roots, 0, 0});
  st.steps.back().payloads = StoredPayloads(s, nullptr);
  // The budget and interrupt, on this thread: between steps, and per row of
  // the row steps (a helper thread only reads `stopped`).  An exception of
  // the hook (a signal in Python) waits for the helper, then goes on.
  StopCheck never_stop;
  StopCheck& stop = options.stop != nullptr ? *options.stop : never_stop;
  std::atomic<bool> stopped{false};
  Status stop_status;
  std::exception_ptr stop_exception;
  auto poll = [&](bool every_time) {
    if (stopped.load(std::memory_order_relaxed)) return false;
    try {
      stop_status = every_time ? stop.Now("streamline") : stop.Poll("streamline");
    } catch (...) {
      stop_exception = std::current_exception();
      stop_status = Status(ErrorCode::kResourceLimit, "streamlining interrupted");
    }
    if (stop_status.ok()) return true;
    stopped.store(true, std::memory_order_release);
    return false;
  };
  auto finish_stopped = [&]() -> Status {
    if (stop_exception) std::rethrow_exception(stop_exception);
    return stop_status;
  };
  if (!poll(true)) return finish_stopped();
  // Lexing conditions first: the exploration then proves folds on the
  // simpler sequences too (and a second pass finds nothing more).
  if (options.lexing_conditions) {
    const auto t_lex = std::chrono::steady_clock::now();
    st.items_canonical = CanonicalLexingConditions(&s, ThreadCount(options.num_threads));
    if (!poll(true)) return finish_stopped();
    st.steps.push_back({"lexing conditions", static_cast<int64_t>(s.row_seq.size()),
                        RowPayloadBytes(s), SeedKeys(s, nullptr), s.num_roots, 0,
                        SecondsSince(t_lex)});
    st.steps.back().payloads = StoredPayloads(s, nullptr);
  }

  // Existing sequences by content, so that a prefix that is already a
  // sequence keeps its id.
  const int32_t num_seqs = static_cast<int32_t>(s.seq_offsets.size()) - 1;
  SequenceIndex seq_id(&s);

  // The two row steps ask separate explorations (the memos are per question
  // anyway): each question gets the same queries in the same order as when
  // the steps run one after the other, so its answers (which the step budget
  // can make depend on what the memo holds) are the same for any number of
  // threads.  With two threads the always-legal step follows the never-legal
  // one a row behind: it skips what that one deleted.
  const ExplorationOptions xo{options.max_stack, options.max_steps};
  ItemExploration never_x(s, xo), always_x(s, xo);
  auto t_step = std::chrono::steady_clock::now();
  const int32_t root_rows = s.root_row_offsets[s.num_roots];
  std::vector<int8_t> dead(num_seqs, -1);
  NeverLegalStep never(s, &never_x);
  std::vector<int32_t> fold_len(num_seqs, -1);
  AlwaysLegalStep always(s, &always_x);
  std::atomic<int32_t> never_rows{0};  // rows the never-legal step has decided
  // The helper sleeps while it has caught up (no spinning on a shared
  // machine) and is woken every kWakeRows rows and at the end.
  constexpr int32_t kWakeRows = 256;
  double never_seconds = 0;
  auto run_never = [&] {
    for (int32_t r = 0; r < root_rows; ++r) {
      if (!poll(false)) {
        never_rows.store(root_rows, std::memory_order_release);  // the helper stops too
        never_rows.notify_all();
        break;
      }
      const int32_t seq = s.row_seq[r];
      if (dead[seq] < 0) {
        never_x.TrimMemo(options.memo_bytes);
        dead[seq] = options.delete_never && never.Dead(seq);
      }
      never_rows.store(r + 1, std::memory_order_release);
      if ((r + 1) % kWakeRows == 0 || r + 1 == root_rows) never_rows.notify_all();
    }
    never_seconds = SecondsSince(t_step);
  };
  // Always legal: per sequence left, the length of the prefix it folds into
  // (0 for a deleted one).
  auto run_always = [&](bool on_this_thread) {
    for (int32_t r = 0; r < root_rows; ++r) {
      for (int32_t done; (done = never_rows.load(std::memory_order_acquire)) <= r;)
        never_rows.wait(done, std::memory_order_acquire);
      if (on_this_thread ? !poll(false) : stopped.load(std::memory_order_acquire)) return;
      const int32_t seq = s.row_seq[r];
      if (fold_len[seq] >= 0) continue;
      always_x.TrimMemo(options.memo_bytes);
      fold_len[seq] = dead[seq] ? 0
                      : options.fold ? always.FoldLength(seq)
                                     : s.seq_offsets[seq + 1] - s.seq_offsets[seq];
    }
  };
  const int32_t threads = ThreadCount(options.num_threads);
  // Without a second thread the steps run one after the other.
  std::thread follower = threads > 1 ? TryThread([&] { run_always(false); }) : std::thread();
  const bool beside = follower.joinable();
  run_never();
  if (beside) {
    follower.join();
  } else if (!stopped) {
    run_always(true);
  }
  if (stopped || !poll(true)) return finish_stopped();
  int64_t rows_live = 0, bytes_live = 0;
  for (int32_t r = 0; r < root_rows; ++r) {
    if (!dead[s.row_seq[r]]) ++rows_live, bytes_live += 16 + 4 * int64_t{s.row_length[r]};
  }
  st.never_queries = never.counts().queries;
  // Rows past the roots' (the simulated tokens') are kept as they are.
  for (int32_t r = root_rows; r < static_cast<int32_t>(s.row_seq.size()); ++r)
    ++rows_live, bytes_live += 16 + 4 * int64_t{s.row_length[r]};
  st.steps.push_back({"never legal", rows_live, bytes_live, SeedKeys(s, &dead), s.num_roots,
                      never.counts().queries, never_seconds});
  st.steps.back().payloads = StoredPayloads(s, &dead);
  st.queries = always.counts().queries;
  st.cache_hits = never.counts().cache_hits + always.counts().cache_hits;
  st.budget_exceeded = never.counts().budget_exceeded + always.counts().budget_exceeded;
  // The questions are answered: their memos and caches go before the rows
  // are rewritten (the rewrite holds the old rows and the new at once).
  never.Release();
  always.Release();
  never_x.TrimMemo(-1);
  always_x.TrimMemo(-1);

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
  RowPayloads payloads(&s);
  // Per root: the old rows of each folded sequence, sorted by the
  // sequence (the trie order).  A row whose sequence folds away is dropped.
  const CompiledStore& cs = s;  // read by the workers while s is not written
  st.rows_deleted += RewriteRootRows(
      old_rows, old_root_offsets, threads,
      [&](int32_t root, std::map<std::vector<int32_t>, std::vector<int32_t>>* merged,
          int64_t* dropped) {
        for (int32_t r = old_root_offsets[root]; r < old_root_offsets[root + 1]; ++r) {
          const int32_t seq = old_seq[r];
          const int32_t len = fold_len[seq];
          if (len == 0 && cs.seq_offsets[seq + 1] > cs.seq_offsets[seq]) {
            ++*dropped;
            continue;
          }
          const int32_t* items = cs.seq_data.data() + cs.seq_offsets[seq];
          (*merged)[std::vector<int32_t>(items, items + len)].push_back(r);
        }
      },
      &seq_id, &payloads, &s);
  // The single-token rows of simulated tokens (no sequence: kept as they are).
  {
    std::unordered_map<int32_t, int32_t> row_of_token;
    for (size_t i = 0; i < s.sim_token.size(); ++i) {
      const int32_t t = s.sim_token[i];
      auto [it, inserted] = row_of_token.emplace(t, static_cast<int32_t>(s.row_seq.size()));
      if (inserted) payloads.Append(0, {t}, text_tokens);
      s.sim_row[i] = it->second;
    }
  }
  // Count the folded rows before the sequences are renumbered.
  for (int32_t r = 0; r < static_cast<int32_t>(old_seq.size()); ++r) {
    const int32_t seq = old_seq[r];
    st.proved += fold_len[seq] > 0 && fold_len[seq] < s.seq_offsets[seq + 1] - s.seq_offsets[seq];
  }
  CompactSequences(&s);
  if (!poll(true)) return finish_stopped();
  st.steps.push_back({"always legal", static_cast<int64_t>(s.row_seq.size()),
                      RowPayloadBytes(s), SeedKeys(s, nullptr), s.num_roots, st.queries,
                      SecondsSince(t_step) - (beside ? 0 : never_seconds)});
  st.steps.back().payloads = StoredPayloads(s, nullptr);

  if (options.share) {
    t_step = std::chrono::steady_clock::now();
    st.groups_shared = ShareRowGroups(&s);
    st.steps.push_back({"shared row groups", static_cast<int64_t>(s.row_seq.size()),
                        RowPayloadBytes(s), st.steps.back().keys, s.num_roots, 0,
                        SecondsSince(t_step)});
    st.steps.back().payloads = StoredPayloads(s, nullptr);
  }
  if (!poll(true)) return finish_stopped();
  st.rows_after = static_cast<int64_t>(s.row_seq.size());
  st.bytes_after = RowPayloadBytes(s);

  // Interchangeable terminals: reported only.
  if (options.grammar) {
    t_step = std::chrono::steady_clock::now();
    st.interchangeable = InterchangeableClasses(*options.grammar);
    st.steps.push_back({"interchangeable", st.rows_after, st.bytes_after, st.steps.back().keys,
                        s.num_roots, 0, SecondsSince(t_step), st.steps.back().payloads});
  }
  st.seconds = SecondsSince(t0);
  if (stats) *stats = st;
  return Status::Ok();
}

Status StreamlineCompiledStore(CompiledStore* store, std::unique_ptr<const Grammar> grammar,
                               const StreamlineOptions& options, StreamlineStats* stats) {
  const std::unique_ptr<const Grammar> owned = std::move(grammar);  // released here
  StreamlineOptions o = options;
  o.grammar = owned.get();
  return StreamlineStore(store, o, stats);
}

}  // namespace cfgmask
