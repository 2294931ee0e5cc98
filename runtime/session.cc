// Decoding session: see session.h.
#include "runtime/session.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include <time.h>

#include "grammar/base/check.h"
#include "lexer/terminal_automaton.h"
#include "maskstore/hypothesis_parser.h"
#include "parser/lr_core.h"
#include "runtime/or_reduce.h"
#include "runtime/row_memo.h"
#include "runtime/suffix_quotient.h"

namespace cfgmask {

namespace {

// AdvanceOne: hypotheses within one token before the parser prunes them,
// and the most that may survive pruning.
constexpr size_t kPruneHypotheses = 64;
constexpr size_t kMaxHypotheses = 1 << 16;

HypothesisParser MakeHypothesis(const CompiledStore* s, const LiveState& l) {
  return HypothesisParser{s, s->lr(), LrOverlay(l.stack), l.indent, l.paren, l.slot_bits};
}

int32_t FindStep(const CompiledStore* s, int32_t q, uint8_t b, int32_t* hits) {
  const int32_t* begin = s->step_byte.data() + s->step_offsets[q];
  const int32_t* end = s->step_byte.data() + s->step_offsets[q + 1];
  const int32_t* it = std::lower_bound(begin, end, static_cast<int32_t>(b));
  if (it == end || *it != b) return -1;
  size_t i = it - s->step_byte.data();
  *hits = s->step_hits[i];
  return s->step_to[i];
}

// An ASCII name byte: a letter, a digit or `_`.
bool IsNameByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// One token index per vocabulary (it reads only the token bytes), shared by
// every session of every store over that vocabulary.
std::shared_ptr<const ScopeTokenIndex> SharedScopeIndex(const CompiledStore& s) {
  static std::mutex mu;
  static std::vector<std::pair<std::pair<uint64_t, int32_t>, std::weak_ptr<const ScopeTokenIndex>>>
      cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(s.tokenizer_identity, s.vocab_size);
  for (auto& [k, w] : cache) {
    if (k != key) continue;
    if (auto p = w.lock()) return p;
  }
  auto p = std::make_shared<const ScopeTokenIndex>(s);
  cache.erase(std::remove_if(cache.begin(), cache.end(), [](const auto& e) { return e.second.expired(); }),
              cache.end());
  cache.emplace_back(key, p);
  return p;
}

}  // namespace

RowPrefixes::RowPrefixes(int32_t roots, int32_t cap)
    : roots_(roots), cap_(std::clamp(cap, 0, kCap)), at_(new std::atomic<uint8_t*>[roots]) {
  for (int32_t i = 0; i < roots; ++i) at_[i].store(nullptr, std::memory_order_relaxed);
}

RowPrefixes::~RowPrefixes() {
  for (int32_t i = 0; i < roots_; ++i) delete[] at_[i].load(std::memory_order_relaxed);
}

const uint8_t* RowPrefixes::For(const CompiledStore& s, int32_t root) {
  if (const uint8_t* p = at_[root].load(std::memory_order_acquire)) return p;
  const int32_t r0 = s.root_row_offsets[root], r1 = s.root_row_offsets[root + 1];
  uint8_t* made = new uint8_t[static_cast<size_t>(r1 - r0) + 1];
  for (int32_t r = r0; r < r1; ++r) {
    made[r - r0] = static_cast<uint8_t>(r == r0 ? 0 : Shared(s, r, cap_));
  }
  uint8_t* expected = nullptr;
  if (!at_[root].compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
    delete[] made;  // another thread published it first
    return expected;
  }
  bytes_.fetch_add(r1 - r0 + 1, std::memory_order_relaxed);
  return made;
}

int32_t RowPrefixes::Shared(const CompiledStore& s, int32_t r, int32_t cap) {
  const int32_t pa = s.row_seq[r - 1], pb = s.row_seq[r];
  const int32_t* a = s.seq_data.data() + s.seq_offsets[pa];
  const int32_t* b = s.seq_data.data() + s.seq_offsets[pb];
  const int32_t n = std::min({s.seq_offsets[pa + 1] - s.seq_offsets[pa],
                              s.seq_offsets[pb + 1] - s.seq_offsets[pb], cap});
  int32_t k = 0;
  while (k < n && a[k] == b[k]) ++k;
  return k;
}

Session::Session(const CompiledStore* store, SessionLimits limits, std::shared_ptr<RowMemo> memo)
    : store_(store), limits_(limits), memo_(std::move(memo)) {
  CFGMASK_CHECK(!memo_ || memo_->store() == store_);  // a memo serves one store
  if (!memo_ && limits_.memo_bytes > 0) {
    memo_ = std::make_shared<RowMemo>(store_, limits_.memo_bytes);
  }
  if (ScopeTokenIndex::Wanted(*store_)) scope_index_ = SharedScopeIndex(*store_);
  if (memo_ && limits_.row_prefix_cap == RowPrefixes::kCap) {
    row_prefixes_ = memo_->row_prefixes();
  } else {
    row_prefixes_ = std::make_shared<RowPrefixes>(store_->num_roots, limits_.row_prefix_cap);
  }
  Reset();
}

int64_t Session::memo_hits() const { return memo_ ? memo_->hits() : 0; }
int64_t Session::memo_misses() const { return memo_ ? memo_->misses() : 0; }

void Session::Reset() {
  live_.clear();
  LiveState l;
  l.q = store_->initial_lex_state;
  l.col = -1;  // no newline yet in the first terminal
  l.stack = LrStack(store_->start_state);
  l.indent = {0};
  live_.push_back(std::move(l));
  text_.clear();
  terminated_ = false;
  if (scope_index_) scope_ = std::make_shared<const ScopeLayer>();
  history_.reset();
  history_len_ = 0;
  ++version_;
  empty_language_ = true;
  const LrTables lr = store_->lr();
  for (int32_t t = 0; t < lr.num_terminals && empty_language_; ++t) {
    empty_language_ = !lr.HasAction(store_->start_state, t);
  }
}

Session::Saved::~Saved() {
  std::shared_ptr<Saved> p = std::move(prev);
  while (p && p.use_count() == 1) p = std::move(p->prev);
}

void Session::PushHistory(std::vector<LiveState> live) {
  auto node = std::make_shared<Saved>();
  node->live = std::move(live);
  node->scope = scope_;
  node->text_size = text_.size();
  node->terminated = terminated_;
  node->prev = std::move(history_);
  history_ = std::move(node);
  ++history_len_;
}

std::vector<int32_t> Session::TerminalTrace() const {
  std::vector<int32_t> fed;
  for (const LiveState& l : live_) {
    if (FinishOk(l, &fed)) return fed;
  }
  return {};
}

Status Session::Rollback(int32_t k) {
  if (k < 0 || k > history_len_) {
    return Status(ErrorCode::kInvalidArgument,
                  "cannot roll back " + std::to_string(k) + " steps: " +
                      std::to_string(history_len_) + " in the history");
  }
  if (k == 0) return Status::Ok();
  std::shared_ptr<Saved> node = history_;
  for (int32_t i = 1; i < k; ++i) node = node->prev;
  live_ = node->live;  // copied: the node may be shared with a fork
  scope_ = node->scope;
  ++version_;
  text_.resize(node->text_size);
  terminated_ = node->terminated;
  history_ = node->prev;
  history_len_ -= k;
  return Status::Ok();
}

std::string Session::JumpForwardString(int32_t max_bytes) const {
  Session cur = *this;
  cur.history_.reset();
  cur.history_len_ = 0;
  std::string forced;
  std::vector<LiveState> out, only;
  while (static_cast<int32_t>(forced.size()) < max_bytes && !cur.terminated_ && !cur.CanEnd()) {
    int found = -1;
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      out.clear();
      if (!cur.AdvanceOne(cur.live_, std::string_view(&c, 1), &out).ok() || out.empty()) continue;
      if (found >= 0) {
        found = -2;
        break;
      }
      found = b;
      only = out;
    }
    if (found < 0) break;
    const char c = static_cast<char>(found);
    if (!cur.ScopeAfter(std::string_view(&c, 1), &cur.scope_)) break;
    forced.push_back(static_cast<char>(found));
    cur.live_ = only;
    ++cur.version_;
  }
  return forced;
}

bool Session::FinishOk(const LiveState& l, std::vector<int32_t>* trace) const {
  const CompiledStore* s = store_;
  for (int32_t e = s->eof_offsets[l.q]; e < s->eof_offsets[l.q + 1]; ++e) {
    const int32_t seq = s->eof_seq[e];
    HypothesisParser sim = MakeHypothesis(s, l);
    if (trace) {
      *trace = l.trace ? *l.trace : std::vector<int32_t>();
      sim.trace = trace;
    }
    bool ok = true;
    for (int32_t i = s->seq_offsets[seq]; ok && i < s->seq_offsets[seq + 1]; ++i) {
      ok = sim.Item(s->seq_data[i], l.col);
    }
    if (ok && sim.Finish()) {
      if (trace) trace->pop_back();  // $END
      return true;
    }
  }
  return false;
}

void Session::AcceptedRows(std::vector<int32_t>* rows, bool* eos) {
  const CompiledStore* s = store_;
  rows->clear();
  *eos = false;
  if (terminated_ || empty_language_) return;
  // The rows of a root are sorted by item sequence: walk them as a trie,
  // keeping one parser simulation per depth of the current prefix.
  thread_local std::vector<HypothesisParser> sims;  // reused: no allocation in steady state
  thread_local std::vector<std::vector<int8_t>> accepts;  // per depth: HypothesisParser::accepts_memo
  int64_t checks = 0, visited = 0, simulated = 0;  // for counters_
  const int64_t reductions0 = ChainMemo::ForThread().reductions;
  for (const LiveState& l : live_) {
    const int32_t root = s->root_index[l.q];
    if (root < 0) continue;
    if (!s->RootRowsOk(root)) {  // a damaged store file: its rows are not followed
      store_damaged_ = true;
      continue;
    }
    uint64_t hash = 0;
    if (memo_) {
      hash = RowMemo::Hash(l);
      if (memo_->Find(l, hash, rows)) continue;
    }
    const size_t first = rows->size();
    size_t low = l.stack.Depth();
    // The simulations' vectors keep their capacity from step to step: the
    // deeper ones are copied into (sims[d + 1] = sims[d]) before any use.
    if (sims.empty()) sims.resize(1, MakeHypothesis(s, l));
    HypothesisParser& base = sims[0];
    base.s = s;
    base.lr = s->lr();
    base.stack = LrOverlay(l.stack);
    base.indent = l.indent;
    base.paren = l.paren;
    base.slots = l.slot_bits;
    base.trace = nullptr;
    if (memo_) base.stack.set_low(&low);
    // Per depth of the prefix, the answers of Accepts on its stack: the
    // rows under one prefix ask the same terminals (a Tail's candidates).
    const size_t terms = static_cast<size_t>(s->num_parse_terminals);
    auto fresh_accepts = [&](int32_t d) {
      if (accepts.size() <= static_cast<size_t>(d)) accepts.resize(d + 1);  // buffers do not move
      accepts[d].assign(terms, -1);
      return accepts[d].data();
    };
    sims[0].accepts_memo = fresh_accepts(0);
    const int32_t r0 = s->root_row_offsets[root], r1 = s->root_row_offsets[root + 1];
    // shared[r - r0]: the prefix row r shares with row r - 1 (RowPrefixes):
    // a row under a rejected prefix is skipped without reading its items.
    const uint8_t* shared = row_prefixes_->For(*s, root);
    const int32_t cap = row_prefixes_->cap();
    int32_t valid = 0;
    int32_t fail_at = INT32_MAX;
    for (int32_t r = r0; r < r1; ++r) {
      int32_t lcp = shared[r - r0];
      if (fail_at <= lcp) continue;  // a rejected prefix
      const int32_t seq = s->row_seq[r];
      const int32_t* items = s->seq_data.data() + s->seq_offsets[seq];
      const int32_t len = s->seq_offsets[seq + 1] - s->seq_offsets[seq];
      if (lcp == cap && r > r0) {  // a longer shared prefix: read it
        lcp = RowPrefixes::Shared(*s, r, INT32_MAX);
        if (fail_at <= lcp) continue;
      }
      ++visited;
      valid = std::min(valid, lcp);
      fail_at = INT32_MAX;
      checks += len - valid;
      // Does the next row's sequence go on from this whole one?  Then the
      // simulation after the last item is wanted (asked at the last item).
      auto extended = [&] {
        if (r + 1 >= r1 || shared[r + 1 - r0] < std::min(len, cap)) return false;
        const int32_t next = s->row_seq[r + 1];
        return s->seq_offsets[next + 1] - s->seq_offsets[next] > len &&
               std::equal(items, items + len, s->seq_data.data() + s->seq_offsets[next]);
      };
      for (int32_t d = valid; d < len; ++d) {
        if (d + 1 == len && !extended()) {
          // The last item: checked without applying it (no copy), so the
          // simulation of the whole sequence is not kept (valid stays d).
          if (!sims[d].ItemOk(items[d], l.col)) fail_at = d + 1;
          break;
        }
        if (static_cast<int32_t>(sims.size()) <= d + 1) sims.resize(d + 2, sims[0]);
        sims[d + 1] = sims[d];
        if (!sims[d + 1].Item(items[d], l.col)) {
          fail_at = d + 1;
          checks -= len - fail_at;  // the checks not made
          break;
        }
        sims[d + 1].accepts_memo = fresh_accepts(d + 1);
        valid = d + 1;
      }
      if (fail_at == INT32_MAX) rows->push_back(r);
    }
    if (!s->root_sim_offsets.empty() && s->root_sim_offsets[root] < s->root_sim_offsets[root + 1]) {
      simulated += s->root_sim_offsets[root + 1] - s->root_sim_offsets[root];
      CheckSimulated(l, root, rows, memo_ ? &low : nullptr);
    }
    if (memo_) memo_->Put(l, hash, low, rows->data() + first, rows->size() - first);
  }
  if (counters_) {
    ++counters_->calls;
    counters_->parser_checks += checks;
    counters_->rows_visited += visited;
    counters_->rows_accepted += static_cast<int64_t>(rows->size());
    counters_->simulated += simulated;
    counters_->reductions += ChainMemo::ForThread().reductions - reductions0;
  }
  *eos = CanEnd();
}

// The simulated tokens of `root` (sorted by bytes) from hypothesis l, as a
// walk over their trie: the lexing hypotheses of a shared prefix are
// computed once, each carrying its parser simulation with the items applied
// as they appear, so splits the parser rejects die at once and a dead
// prefix skips every token below it.  Mirrors AdvanceOne byte for byte.
void Session::CheckSimulated(const LiveState& l, int32_t root, std::vector<int32_t>* rows,
                             size_t* low) const {
  const CompiledStore* s = store_;
  struct W {
    int32_t q;
    bool abs;
    int32_t col;
    HypothesisParser sim;
  };
  thread_local std::vector<std::vector<W>> levels;
  if (levels.empty()) levels.resize(1);
  levels[0].clear();
  levels[0].push_back(W{l.q, false, 0, MakeHypothesis(s, l)});
  levels[0][0].sim.stack.set_low(low);
  auto apply = [&](HypothesisParser* sim, int32_t hits_seq) {
    for (int32_t i = s->seq_offsets[hits_seq]; i < s->seq_offsets[hits_seq + 1]; ++i) {
      if (!sim->Item(s->seq_data[i], l.col)) return false;
    }
    return true;
  };
  std::string_view prev;
  int32_t valid = 0;               // levels[0..valid] hold the hypotheses of prev's prefixes
  int32_t dead_at = INT32_MAX;     // prev's prefix of this length has no hypothesis
  for (int32_t i = s->root_sim_offsets[root]; i < s->root_sim_offsets[root + 1]; ++i) {
    const std::string_view bytes = s->TokenBytes(s->sim_token[i]);
    int32_t lcp = 0;
    while (lcp < static_cast<int32_t>(std::min(bytes.size(), prev.size())) && bytes[lcp] == prev[lcp]) {
      ++lcp;
    }
    prev = bytes;
    if (dead_at <= lcp) continue;
    dead_at = INT32_MAX;
    valid = std::min(valid, lcp);
    const int32_t len = static_cast<int32_t>(bytes.size());
    if (static_cast<int32_t>(levels.size()) <= len) levels.resize(len + 1);
    for (int32_t d = valid; d < len; ++d) {
      const uint8_t b = static_cast<uint8_t>(bytes[d]);
      std::vector<W>& next = levels[d + 1];
      next.clear();
      for (const W& w : levels[d]) {
        int32_t hits = 0;
        const int32_t to = FindStep(s, w.q, b, &hits);
        if (to >= 0) {
          W n{to, w.abs, w.col, w.sim};
          if (apply(&n.sim, hits)) {
            ColumnDelta c{n.abs, n.col};
            c.Feed(b);
            n.abs = c.absolute;
            n.col = c.value;
            next.push_back(std::move(n));
          }
        }
        for (int32_t c = s->cand_offsets[w.q]; c < s->cand_offsets[w.q + 1]; ++c) {
          const int32_t t = s->cand_terminal[c];
          int32_t h2 = 0;
          const int32_t q2 = FindStep(s, s->cand_to[c], b, &h2);
          if (q2 < 0) continue;
          int32_t col = INT32_MIN;
          if (t == s->indenter_nl && s->indenter_nl >= 0) {
            col = ColumnDelta::Resolve(w.abs, w.col, l.col);
            if (col < 0) col = -1;
          }
          W n{q2, true, -1, w.sim};
          if (!n.sim.Item(s->cand_item[c], l.col, col) || !apply(&n.sim, h2)) continue;
          ColumnDelta cd{n.abs, n.col};
          cd.Feed(b);
          n.abs = cd.absolute;
          n.col = cd.value;
          next.push_back(std::move(n));
        }
      }
      valid = d + 1;
      if (next.empty()) {
        dead_at = d + 1;
        break;
      }
    }
    if (dead_at != INT32_MAX) continue;
    for (const W& w : levels[len]) {
      if (s->compact_to[w.q] < 0) continue;
      if (s->tail_item[w.q] >= 0 && !w.sim.TailOk(s->tail_item[w.q])) continue;
      rows->push_back(s->sim_row[i]);
      break;
    }
  }
}

void OrRows(const CompiledStore& s, const int32_t* rows, size_t n, uint32_t* mask) {
  const int32_t words = s.mask_words();
  for (size_t k = 0; k < n; ++k) {
    const int32_t r = rows[k];
    const int32_t off = s.row_offset[r], rlen = s.row_length[r];
    switch (static_cast<RowKind>(s.row_kind[r])) {
      case RowKind::kList:
        for (int32_t i = 0; i < rlen; ++i) {
          int32_t t = s.row_tokens[off + i];
          mask[t >> 5] |= 1u << (t & 31);
        }
        break;
      case RowKind::kBitset:
        for (int32_t w = 0; w < rlen; ++w) mask[w] |= s.row_bits[off + w];
        break;
      case RowKind::kComplement: {
        // Every text token but the listed ones: OR all, then restore the
        // listed bits from a copy taken before.
        std::vector<uint32_t> m(words, 0);
        for (int32_t t = 0; t < s.vocab_size; ++t) {
          if (!s.token_special[t]) m[t >> 5] |= 1u << (t & 31);
        }
        for (int32_t i = 0; i < rlen; ++i) {
          int32_t t = s.row_tokens[off + i];
          m[t >> 5] &= ~(1u << (t & 31));
        }
        for (int32_t w = 0; w < words; ++w) mask[w] |= m[w];
        break;
      }
    }
  }
}

void Session::FillMask(uint32_t* mask) {
  const CompiledStore* s = store_;
  std::memset(mask, 0, sizeof(uint32_t) * s->mask_words());
  bool eos = false;
  AcceptedRows(&scratch_rows_, &eos);
  const uint32_t* text_mask = memo_ ? memo_->text_mask().data() : nullptr;
  if (!text_mask) {
    if (text_mask_.empty()) text_mask_ = TextTokenMask(*s);
    text_mask = text_mask_.data();
  }
  OrRowsSimd(*s, text_mask, scratch_rows_.data(), scratch_rows_.size(), mask);
  if (eos) {
    for (int32_t e : s->eos_ids) mask[e >> 5] |= 1u << (e & 31);
  }
  if (!counters_ || (!scope_ && !quotient_)) {  // (no filter: FilterMask returns at once)
    FilterMask(mask);
    return;
  }
  auto now_ns = [] {  // the monotonic clock: vDSO, tens of ns
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  };
  const int64_t f0 = now_ns();
  FilterMask(mask);
  counters_->filter_ns += now_ns() - f0;
}

void Session::FilterMask(uint32_t* mask) const {
  if (scope_) {
    scope_->Filter(*store_, *scope_index_, mask);
    ClearWordsLeadingNowhere(mask);
  }
  if (!quotient_ || terminated_) return;
  // The suffix's exact check per allowed token (runtime/suffix_quotient.h);
  // EOS: CanEnd decided it.
  std::vector<LiveState> out;
  quotient_->Filter(live_, mask, [&](int32_t t) {
    out.clear();
    return AdvanceOne(live_, store_->TokenBytes(t), &out).ok() && MeetsSuffix(out);
  });
}

bool Session::FilterClears(std::vector<int32_t>* clears) const {
  clears->clear();
  if (quotient_ && !terminated_) return false;  // checks classes of the allowed tokens
  if (!scope_) return true;
  bool at_word = false, colon_only = true;
  if (scope_->Armed(&at_word, &colon_only) || at_word) return false;
  // Otherwise the layer checks listed tokens one at a time, each on its own
  // copy of the layer (ScopeLayer::Filter): what it clears from a full mask
  // is what it clears from any mask.
  const int32_t words = store_->mask_words();
  std::vector<uint32_t> all(static_cast<size_t>(words), ~0u);
  scope_->Filter(*store_, *scope_index_, all.data());
  ClearWordsLeadingNowhere(all.data());
  for (int32_t w = 0; w < words; ++w) {
    for (uint32_t bits = ~all[w]; bits != 0; bits &= bits - 1) {
      const int32_t t = w * 32 + __builtin_ctz(bits);
      if (t < store_->vocab_size) clears->push_back(t);
    }
  }
  return true;
}

bool Session::MeetsSuffix(const std::vector<LiveState>& out) const {
  if (!quotient_) return true;
  for (const LiveState& l : out) {
    if (quotient_->Viable(l)) return true;
  }
  return false;
}

bool Session::ScopeAfter(std::string_view bytes, std::shared_ptr<const ScopeLayer>* out) const {
  if (!scope_) return true;
  auto next = std::make_shared<ScopeLayer>(*scope_);
  if (!next->Feed(bytes)) return false;
  *out = std::move(next);
  return true;
}

bool Session::WordLeadsNowhere(const std::vector<LiveState>& live, const ScopeLayer& layer) const {
  if (!dead_word_check_ || live.empty() || !layer.RefusesAsyncAhead()) return false;
  // A depth-first search over the name bytes that the hypotheses can still
  // read: a word that a blank may end (the lexer ends its terminal and the
  // parser takes it) and the layer keeps, other than `async`, is a way on.
  // Keywords have at most 8 letters and a name that the parser takes ends
  // at once, so the search is short; past its limits the word stands.
  constexpr size_t kMaxLetters = 12;
  constexpr int kMaxNodes = 64;
  const CompiledStore* s = store_;
  const std::string word = layer.partial_word();
  struct Node {
    std::vector<LiveState> live;
    std::string more;
  };
  std::vector<Node> stack;
  stack.push_back({live, ""});
  std::vector<LiveState> out;
  int nodes = 0;
  while (!stack.empty()) {
    if (++nodes > kMaxNodes) return false;
    Node n = std::move(stack.back());
    stack.pop_back();
    if (word + n.more != "async") {
      out.clear();
      if (!AdvanceOne(n.live, " ", &out).ok()) return false;
      if (!out.empty()) {
        ScopeLayer end = layer;
        if (end.Feed(n.more + " ")) return false;
      }
    }
    if (n.more.size() >= kMaxLetters) return false;
    for (int c = 0; c < 128; ++c) {
      if (!IsNameByte(static_cast<unsigned char>(c))) continue;
      // Only a byte some hypothesis has a step on (in its terminal, or
      // after a boundary) can go on: AdvanceOne's own two ways.
      bool step = false;
      for (const LiveState& l : n.live) {
        int32_t hits = 0;
        step = FindStep(s, l.q, static_cast<uint8_t>(c), &hits) >= 0;
        for (int32_t k = s->cand_offsets[l.q]; !step && k < s->cand_offsets[l.q + 1]; ++k) {
          step = FindStep(s, s->cand_to[k], static_cast<uint8_t>(c), &hits) >= 0;
        }
        if (step) break;
      }
      if (!step) continue;
      const char byte = static_cast<char>(c);
      out.clear();
      if (!AdvanceOne(n.live, std::string_view(&byte, 1), &out).ok()) return false;
      if (!out.empty()) stack.push_back({std::move(out), n.more + byte});
      out = {};
    }
  }
  return true;
}

void Session::ClearWordsLeadingNowhere(uint32_t* mask) const {
  if (!scope_ || terminated_ || !dead_word_check_) return;
  std::vector<int32_t> cands;
  scope_->AsyncPrefixCandidates(*scope_index_, mask, &cands);
  std::vector<LiveState> out;
  for (int32_t t : cands) {
    const std::string_view bytes = store_->TokenBytes(t);
    ScopeLayer next = *scope_;
    if (!next.Feed(bytes) || !next.RefusesAsyncAhead()) continue;
    out.clear();
    if (!AdvanceOne(live_, bytes, &out).ok() || out.empty()) continue;
    if (WordLeadsNowhere(out, next)) mask[t >> 5] &= ~(1u << (t & 31));
  }
}

bool Session::CanEnd() {
  if (terminated_) return false;
  if (suffix_) {
    // Both must end: the parser's read of the suffix (memoised across
    // steps, SuffixMemo) first, and only where it ends the scope layer's
    // (a copy fed the whole suffix, not memoised).  One answer per step:
    // every change of live_ or scope_ bumps version_.
    if (suffix_answer_version_ != version_) {
      suffix_answer_ = SuffixEnds();
      if (suffix_answer_ && scope_) {
        ScopeLayer end = *scope_;
        suffix_answer_ = end.Feed(*suffix_) && end.CanEnd();
      }
      suffix_answer_version_ = version_;
    }
    return suffix_answer_;
  }
  if (scope_ && !scope_->CanEnd()) return false;
  for (const LiveState& l : live_) {
    if (FinishOk(l)) return true;
  }
  return false;
}

bool SameFuture(const LiveState& a, const LiveState& b, bool columns) {
  return a.q == b.q && (!columns || a.col == b.col) && a.stack == b.stack &&
         a.indent == b.indent && a.paren == b.paren && a.slot_bits == b.slot_bits;
}

bool SameFuture(const std::vector<LiveState>& a, const std::vector<LiveState>& b, bool columns) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [columns](const LiveState& x, const LiveState& y) {
                      return SameFuture(x, y, columns);
                    });
}

uint64_t FutureHash(const std::vector<LiveState>& live, uint64_t seed, bool columns) {
  uint64_t h = seed;
  auto mix = [&h](uint64_t v) {  // FNV-1a over the value's 8 bytes
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
  };
  for (const LiveState& l : live) {
    mix(static_cast<uint32_t>(l.q));
    if (columns) mix(static_cast<uint32_t>(l.col));
    for (uint64_t w : l.slot_bits) mix(w);
    mix(l.stack.Hash());
    for (int32_t x : l.indent) mix(static_cast<uint32_t>(x));
    mix(static_cast<uint32_t>(l.paren));
    mix(0x5eed);  // between hypotheses
  }
  return h;
}

// The hypotheses read the suffix byte by byte (each byte is a step of the
// store's automaton, as in AdvanceBytes); can one of them end there?
bool Session::SuffixEnds() {
  constexpr size_t kCheckpoint = 16;
  constexpr size_t kMaxEntries = size_t{1} << 16;
  std::vector<LiveState> cur = live_, out;
  const std::string_view bytes = *suffix_;
  std::vector<std::pair<uint64_t, std::vector<LiveState>>> seen;
  const bool columns = store_->indenter_nl >= 0;
  bool known = false, answer = false;
  for (size_t i = 0;; ++i) {
    if (cur.empty()) {
      known = true;
      break;
    }
    if (i % kCheckpoint == 0) {
      const uint64_t key = FutureHash(cur, 0x9e3779b97f4a7c15ull * (i + 1), columns);
      if (auto it = suffix_memo_.at.find(key); it != suffix_memo_.at.end()) {
        for (const auto& [lives, ends] : it->second) {
          if (SameFuture(lives, cur, columns)) {
            known = true;
            answer = ends;
            break;
          }
        }
        if (known) break;
      }
      seen.emplace_back(key, cur);
    }
    if (i == bytes.size()) break;
    out.clear();
    if (!AdvanceOne(cur, bytes.substr(i, 1), &out).ok()) {
      known = true;  // over the session's limits: no end this way
      break;
    }
    cur.swap(out);
  }
  if (!known) {
    for (const LiveState& l : cur) {
      if (FinishOk(l)) {
        answer = true;
        break;
      }
    }
  }
  for (auto& [key, lives] : seen) {
    if (suffix_memo_.entries >= kMaxEntries) {
      suffix_memo_.at.clear();
      suffix_memo_.entries = 0;
    }
    suffix_memo_.at[key].emplace_back(std::move(lives), answer);
    ++suffix_memo_.entries;
  }
  return answer;
}

void Session::SetSuffix(std::string suffix, SuffixMiddle middle) {
  if (suffix.empty()) {
    suffix_.reset();
  } else {
    suffix_ = std::make_shared<const std::string>(std::move(suffix));
  }
  suffix_answer_version_ = ~uint64_t{0};
  suffix_memo_ = SuffixMemo();
  quotient_.reset();
  if (suffix_ && SuffixQuotient::Supported(*store_) && !scope_index_) {
    // Past its limit the quotient is not built: prefix masks, as elsewhere.
    SuffixQuotientLimits limits;
    limits.middle = middle;
    if (!SuffixQuotient::Build(store_, *suffix_, limits, &quotient_, nullptr,
                               memo_ ? memo_->suffix_lexings() : nullptr).ok()) {
      quotient_.reset();
    }
  }
}

const std::string& Session::suffix() const {
  static const std::string kNone;
  return suffix_ ? *suffix_ : kNone;
}

Status Session::AdvanceOne(const std::vector<LiveState>& in, std::string_view bytes,
                           std::vector<LiveState>* out) const {
  const CompiledStore* s = store_;
  if (empty_language_) {  // nothing is a prefix of a text in the language
    out->clear();
    return Status::Ok();
  }
  struct W {
    int32_t q;
    std::vector<std::pair<int32_t, int32_t>> items;  // (item id, column override)
    bool abs;
    int32_t col;
  };
  for (const LiveState& l : in) {
    std::vector<W> cur = {W{l.q, {}, false, 0}}, next;
    for (unsigned char b : bytes) {
      next.clear();
      for (const W& w : cur) {
        int32_t hits = 0;
        int32_t to = FindStep(s, w.q, b, &hits);
        auto feed = [&](W n, int32_t hits_seq) {
          for (int32_t i = s->seq_offsets[hits_seq]; i < s->seq_offsets[hits_seq + 1]; ++i) {
            n.items.emplace_back(s->seq_data[i], INT32_MIN);
          }
          ColumnDelta c{n.abs, n.col};
          c.Feed(b);
          n.abs = c.absolute;
          n.col = c.value;
          next.push_back(std::move(n));
        };
        if (to >= 0) feed(W{to, w.items, w.abs, w.col}, hits);
        for (int32_t c = s->cand_offsets[w.q]; c < s->cand_offsets[w.q + 1]; ++c) {
          int32_t q1 = s->cand_to[c];
          // The frozen Emit item has no column: the walk knows it.
          const int32_t t = s->cand_terminal[c];
          int32_t col = INT32_MIN;
          if (t == s->indenter_nl && s->indenter_nl >= 0) {
            col = ColumnDelta::Resolve(w.abs, w.col, l.col);
            if (col < 0) col = -1;
          }
          std::vector<std::pair<int32_t, int32_t>> items = w.items;
          items.emplace_back(s->cand_item[c], col);
          int32_t h2 = 0;
          int32_t q2 = FindStep(s, q1, b, &h2);
          if (q2 < 0) continue;
          feed(W{q2, std::move(items), true, -1}, h2);
        }
      }
      cur.swap(next);
      if (cur.empty()) break;
      // Splits multiply on tokens like "========" (Fibonacci many ways to cut
      // it into "=" and "=="): past a few dozen hypotheses, drop those whose
      // items so far the parser already rejects.  Exact: the items are
      // applied in the same order below.
      if (cur.size() > kPruneHypotheses) {
        next.clear();
        for (W& w : cur) {
          HypothesisParser sim = MakeHypothesis(s, l);
          bool ok = true;
          for (auto [item, col] : w.items) {
            if (!sim.Item(item, l.col, col)) {
              ok = false;
              break;
            }
          }
          if (ok) next.push_back(std::move(w));
        }
        cur.swap(next);
        if (cur.size() > kMaxHypotheses) {
          return Status(ErrorCode::kResourceLimit,
                        "more than " + std::to_string(kMaxHypotheses) +
                            " lexings of one token survive the parser");
        }
        if (cur.empty()) break;
      }
    }
    for (const W& w : cur) {
      const int32_t q = s->compact_to[w.q];
      if (q < 0) continue;
      // Apply the items.
      HypothesisParser sim = MakeHypothesis(s, l);
      std::vector<int32_t> fed;
      if (trace_) sim.trace = &fed;
      bool ok = true;
      for (auto [item, col] : w.items) {
        if (!sim.Item(item, l.col, col)) {
          ok = false;
          break;
        }
      }
      if (ok && s->tail_item[w.q] >= 0) {
        sim.trace = nullptr;
        ok = sim.TailOk(s->tail_item[w.q]);
      }
      if (!ok) continue;
      LiveState n;
      if (trace_) {
        auto t = std::make_shared<std::vector<int32_t>>(l.trace ? *l.trace : std::vector<int32_t>());
        t->insert(t->end(), fed.begin(), fed.end());
        n.trace = std::move(t);
      }
      n.q = q;
      n.col = ColumnDelta::Resolve(w.abs, w.col, l.col);
      n.stack = sim.stack.Commit();
      n.indent = std::move(sim.indent);
      n.paren = sim.paren;
      const int32_t map = s->compact_map[w.q];
      const int32_t words = s->scanner_words;
      for (int32_t i = s->set_offsets[map]; i < s->set_offsets[map + 1]; ++i) {
        const int32_t ns = s->set_data[i] >> 16, old = s->set_data[i] & 0xFFFF;
        // A slot the step did not open: only a forged or damaged store (the
        // loader checks the map's ranges, not what each step opens).
        if (static_cast<size_t>(old + 1) * words > sim.slots.size()) {
          return Status(ErrorCode::kStoreFile,
                        "damaged store: a lexer state's slot map names slot " +
                            std::to_string(old) + ", which its step does not open");
        }
        if (n.slot_bits.size() < static_cast<size_t>(ns + 1) * words) {
          n.slot_bits.resize(static_cast<size_t>(ns + 1) * words, 0);
        }
        for (int32_t k = 0; k < words; ++k) {
          n.slot_bits[static_cast<size_t>(ns) * words + k] |=
              sim.slots[static_cast<size_t>(old) * words + k];
        }
      }
      out->push_back(std::move(n));
    }
  }
  // Deduplicate.
  std::sort(out->begin(), out->end(), [](const LiveState& a, const LiveState& b) {
    if (a.q != b.q) return a.q < b.q;
    if (a.col != b.col) return a.col < b.col;
    if (const int c = LrStack::Compare(a.stack, b.stack); c != 0) return c < 0;
    return std::tie(a.indent, a.paren, a.slot_bits) < std::tie(b.indent, b.paren, b.slot_bits);
  });
  out->erase(std::unique(out->begin(), out->end(),
                         [](const LiveState& a, const LiveState& b) { return SameFuture(a, b); }),
             out->end());
  if (static_cast<int32_t>(out->size()) > limits_.max_live_states) {
    return Status(ErrorCode::kResourceLimit,
                  "more than " + std::to_string(limits_.max_live_states) +
                      " live lexer hypotheses after one token");
  }
  return Status::Ok();
}

Status Session::store_status() const {
  if (!store_damaged_) return Status::Ok();
  return Status(ErrorCode::kStoreFile, DamagedRowsMessage());
}

Status Session::Advance(int32_t token) {
  if (token < 0 || token >= store_->vocab_size) {
    return Status(ErrorCode::kInvalidToken, "token id " + std::to_string(token) +
                                                " is out of range [0, " +
                                                std::to_string(store_->vocab_size) + ")");
  }
  if (terminated_) return Status(ErrorCode::kInvalidToken, "the session has already ended");
  if (store_damaged_) return store_status();
  for (int32_t e : store_->eos_ids) {
    if (e == token) {
      if (!CanEnd()) {
        return Status(ErrorCode::kInvalidToken, "EOS token " + std::to_string(token) +
                                                    " is not allowed: the text is not complete");
      }
      PushHistory(live_);
      terminated_ = true;
      ++version_;
      return Status::Ok();
    }
  }
  if (store_->token_special[token]) {
    return Status(ErrorCode::kInvalidToken,
                  "token " + std::to_string(token) + " is a special token");
  }
  std::vector<LiveState> out;
  CFGMASK_RETURN_IF_ERROR(AdvanceOne(live_, store_->TokenBytes(token), &out));
  std::shared_ptr<const ScopeLayer> scope = scope_;
  if (out.empty() || !ScopeAfter(store_->TokenBytes(token), &scope) ||
      (scope && WordLeadsNowhere(out, *scope))) {
    return Status(ErrorCode::kInvalidToken,
                  "token " + std::to_string(token) + " cannot continue the text at offset " +
                      std::to_string(text_.size()));
  }
  if (!MeetsSuffix(out)) {
    return Status(ErrorCode::kInvalidToken,
                  "token " + std::to_string(token) + " at offset " + std::to_string(text_.size()) +
                      " leaves no middle that meets the suffix");
  }
  PushHistory(std::move(live_));
  scope_ = std::move(scope);
  live_ = std::move(out);
  ++version_;
  text_.append(store_->TokenBytes(token));
  return Status::Ok();
}

Status Session::AdvanceBytes(std::string_view bytes) {
  if (terminated_) return Status(ErrorCode::kInvalidToken, "the session has already ended");
  // Byte by byte: every single byte is a token of a byte-level or
  // byte-fallback vocabulary, so each step ends in a state of the store.
  std::vector<LiveState> cur = live_, out;
  for (size_t i = 0; i < bytes.size() && !cur.empty(); ++i) {
    out.clear();
    CFGMASK_RETURN_IF_ERROR(AdvanceOne(cur, bytes.substr(i, 1), &out));
    cur.swap(out);
  }
  out.swap(cur);
  std::shared_ptr<const ScopeLayer> scope = scope_;
  if (out.empty() || !ScopeAfter(bytes, &scope) || (scope && WordLeadsNowhere(out, *scope))) {
    std::string shown(bytes.substr(0, 40));
    return Status(ErrorCode::kInvalidToken,
                  "text offset " + std::to_string(text_.size()) + ": \"" + shown +
                      "\" cannot continue a valid prefix");
  }
  PushHistory(std::move(live_));
  scope_ = std::move(scope);
  live_ = std::move(out);
  ++version_;
  text_.append(bytes);
  return Status::Ok();
}

bool Session::AllowsSlow(int32_t token) {
  if (token < 0 || token >= store_->vocab_size) return false;
  for (int32_t e : store_->eos_ids) {
    if (e == token) return CanEnd();
  }
  if (store_->token_special[token] || store_->TokenBytes(token).empty()) return false;
  std::vector<LiveState> out;
  Status st = AdvanceOne(live_, store_->TokenBytes(token), &out);
  std::shared_ptr<const ScopeLayer> scope;
  return st.ok() && !out.empty() && ScopeAfter(store_->TokenBytes(token), &scope) &&
         !(scope && WordLeadsNowhere(out, *scope)) && MeetsSuffix(out);
}

}  // namespace cfgmask
