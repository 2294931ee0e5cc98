// Adaptive row storage: see row_codec.h.
#include "maskstore/row_codec.h"

#include <cstring>
#include <set>

#include "maskstore/store_format.h"

namespace cfgmask {

int32_t TextTokenCount(const CompiledStore& s) {
  int32_t n = 0;
  for (int32_t t = 0; t < s.vocab_size; ++t) n += !s.token_special[t];
  return n;
}

int64_t RowPayloadBytes(const CompiledStore& s) {
  return static_cast<int64_t>(s.row_tokens.size()) * 4 + static_cast<int64_t>(s.row_bits.size()) * 4 +
         static_cast<int64_t>(s.row_seq.size()) * 16;
}

void AppendRow(int32_t seq, const std::vector<int32_t>& toks, int32_t text_tokens,
               CompiledStore* s) {
  const int32_t V = s->vocab_size;
  const int32_t words = s->mask_words();
  const int64_t n = static_cast<int64_t>(toks.size());
  const int64_t comp = text_tokens - n;
  s->row_seq.push_back(seq);
  if (n <= comp && n <= words / 4) {
    s->row_kind.push_back(static_cast<int32_t>(RowKind::kList));
    s->row_offset.push_back(static_cast<int32_t>(s->row_tokens.size()));
    s->row_length.push_back(static_cast<int32_t>(n));
    s->row_tokens.append(toks.begin(), toks.end());
  } else if (comp <= words / 4) {
    s->row_kind.push_back(static_cast<int32_t>(RowKind::kComplement));
    s->row_offset.push_back(static_cast<int32_t>(s->row_tokens.size()));
    size_t i = 0;
    int32_t len = 0;
    for (int32_t t = 0; t < V; ++t) {
      if (s->token_special[t]) continue;
      if (i < toks.size() && toks[i] == t) {
        ++i;
        continue;
      }
      s->row_tokens.push_back(t);
      ++len;
    }
    s->row_length.push_back(len);
  } else {
    s->row_kind.push_back(static_cast<int32_t>(RowKind::kBitset));
    s->row_offset.push_back(static_cast<int32_t>(s->row_bits.size()));
    s->row_length.push_back(words);
    const size_t base = s->row_bits.size();
    s->row_bits.resize(base + words, 0);
    for (int32_t t : toks) s->row_bits[base + t / 32] |= 1u << (t % 32);
  }
}

namespace {

uint64_t PayloadHash(bool bits, const void* data, int32_t length) {
  const uint64_t h = StoreChecksum(static_cast<const char*>(data), static_cast<size_t>(length) * 4);
  return (h ^ (bits ? 0x9e3779b97f4a7c15ULL : 0)) * 0xff51afd7ed558ccdULL;
}

}  // namespace

RowPayloads::RowPayloads(CompiledStore* s) : s_(s) {
  for (size_t r = 0; r < s->row_seq.size(); ++r) {
    const bool bits = static_cast<RowKind>(s->row_kind[r]) == RowKind::kBitset;
    const int32_t off = s->row_offset[r], len = s->row_length[r];
    const void* data = bits ? static_cast<const void*>(s->row_bits.data() + off)
                            : static_cast<const void*>(s->row_tokens.data() + off);
    const uint64_t h = PayloadHash(bits, data, len);
    index_.FindOrAdd(
        h, entries_.size(),
        [&](int32_t id) {
          const Entry& e = entries_[id];
          return e.hash == h && e.bits == bits && e.length == len && e.offset == off;
        },
        [&] { entries_.push_back({h, off, len, bits}); },
        [&](int32_t id) { return entries_[id].hash; });
  }
}

int32_t RowPayloads::Intern(bool bits, const void* data, int32_t length) {
  const uint64_t h = PayloadHash(bits, data, length);
  const size_t bytes = static_cast<size_t>(length) * 4;
  const int32_t id = index_.FindOrAdd(
      h, entries_.size(),
      [&](int32_t id) {
        const Entry& e = entries_[id];
        if (e.hash != h || e.bits != bits || e.length != length) return false;
        const void* have = bits ? static_cast<const void*>(s_->row_bits.data() + e.offset)
                                : static_cast<const void*>(s_->row_tokens.data() + e.offset);
        return bytes == 0 || std::memcmp(have, data, bytes) == 0;
      },
      [&] {
        int32_t off;
        if (bits) {
          off = static_cast<int32_t>(s_->row_bits.size());
          const uint32_t* p = static_cast<const uint32_t*>(data);
          s_->row_bits.append(p, p + length);
        } else {
          off = static_cast<int32_t>(s_->row_tokens.size());
          const int32_t* p = static_cast<const int32_t*>(data);
          s_->row_tokens.append(p, p + length);
        }
        entries_.push_back({h, off, length, bits});
      },
      [&](int32_t id) { return entries_[id].hash; });
  return entries_[id].offset;
}

void RowPayloads::AppendList(int32_t seq, RowKind kind, std::span<const int32_t> ids) {
  const int32_t len = static_cast<int32_t>(ids.size());
  const int32_t off = Intern(false, ids.data(), len);
  s_->row_seq.push_back(seq);
  s_->row_kind.push_back(static_cast<int32_t>(kind));
  s_->row_offset.push_back(off);
  s_->row_length.push_back(len);
}

void RowPayloads::AppendBits(int32_t seq, std::span<const uint32_t> bits) {
  const int32_t len = static_cast<int32_t>(bits.size());
  const int32_t off = Intern(true, bits.data(), len);
  s_->row_seq.push_back(seq);
  s_->row_kind.push_back(static_cast<int32_t>(RowKind::kBitset));
  s_->row_offset.push_back(off);
  s_->row_length.push_back(len);
}

void RowPayloads::Append(int32_t seq, const std::vector<int32_t>& toks, int32_t text_tokens) {
  const int32_t V = s_->vocab_size;
  const int32_t words = s_->mask_words();
  const int64_t n = static_cast<int64_t>(toks.size());
  const int64_t comp = text_tokens - n;
  if (n <= comp && n <= words / 4) {
    AppendList(seq, RowKind::kList, toks);
  } else if (comp <= words / 4) {
    scratch_.clear();
    size_t i = 0;
    for (int32_t t = 0; t < V; ++t) {
      if (s_->token_special[t]) continue;
      if (i < toks.size() && toks[i] == t) {
        ++i;
        continue;
      }
      scratch_.push_back(t);
    }
    AppendList(seq, RowKind::kComplement, scratch_);
  } else {
    scratch_bits_.assign(words, 0);
    for (int32_t t : toks) scratch_bits_[t / 32] |= 1u << (t % 32);
    AppendBits(seq, scratch_bits_);
  }
}

void RowPayloads::Copy(const CompiledStore& old, int32_t r, int32_t seq) {
  const int32_t off = old.row_offset[r], len = old.row_length[r];
  if (static_cast<RowKind>(old.row_kind[r]) == RowKind::kBitset) {
    AppendBits(seq, {old.row_bits.data() + off, static_cast<size_t>(len)});
  } else {
    AppendList(seq, static_cast<RowKind>(old.row_kind[r]),
               {old.row_tokens.data() + off, static_cast<size_t>(len)});
  }
}

int64_t DistinctRowPayloads(const CompiledStore& s) {
  CompiledStore out;  // the payloads re-interned from empty arrays
  out.vocab_size = s.vocab_size;
  RowPayloads p(&out);
  for (size_t r = 0; r < s.row_seq.size(); ++r) p.Copy(s, static_cast<int32_t>(r), 0);
  return p.distinct();
}

void DecodeRow(const CompiledStore& s, int32_t r, std::vector<int32_t>* out) {
  const int32_t off = s.row_offset[r], len = s.row_length[r];
  switch (static_cast<RowKind>(s.row_kind[r])) {
    case RowKind::kList:
      out->insert(out->end(), s.row_tokens.begin() + off, s.row_tokens.begin() + off + len);
      break;
    case RowKind::kComplement: {
      int32_t i = 0;
      for (int32_t t = 0; t < s.vocab_size; ++t) {
        if (s.token_special[t]) continue;
        if (i < len && s.row_tokens[off + i] == t) {
          ++i;
          continue;
        }
        out->push_back(t);
      }
      break;
    }
    case RowKind::kBitset:
      for (int32_t t = 0; t < s.vocab_size; ++t)
        if ((s.row_bits[off + t / 32] >> (t % 32)) & 1) out->push_back(t);
      break;
  }
}

void CompactSequences(CompiledStore* s) {
  const int32_t n = static_cast<int32_t>(s->seq_offsets.size()) - 1;
  std::vector<int32_t> new_id(n, -1);
  new_id[0] = 0;
  for (int32_t v : s->row_seq) new_id[v] = 0;
  for (int32_t v : s->eof_seq) new_id[v] = 0;
  for (int32_t v : s->step_hits) new_id[v] = 0;
  std::vector<int32_t> offsets{0}, data;
  int32_t next_id = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (new_id[i] < 0) continue;
    new_id[i] = next_id++;
    data.insert(data.end(), s->seq_data.begin() + s->seq_offsets[i],
                s->seq_data.begin() + s->seq_offsets[i + 1]);
    offsets.push_back(static_cast<int32_t>(data.size()));
  }
  s->seq_offsets = std::move(offsets);
  s->seq_data = std::move(data);
  for (int32_t& v : s->row_seq) v = new_id[v];
  for (int32_t& v : s->eof_seq) v = new_id[v];
  for (int32_t& v : s->step_hits) v = new_id[v];
}

void TerminalSequenceKey(const CompiledStore& s, int32_t seq, std::vector<int32_t>* key) {
  key->clear();
  for (int32_t i = s.seq_offsets[seq]; i < s.seq_offsets[seq + 1]; ++i) {
    const int32_t item = s.seq_data[i];
    if (s.KindOf(item) == ItemKind::kEmit) key->push_back(s.item_terminal[item]);
    if (s.KindOf(item) == ItemKind::kTail) key->push_back(-2 - s.item_blockers[item]);
  }
}

int64_t TerminalSequenceKeys(const CompiledStore& s) {
  std::set<std::vector<int32_t>> keys;
  std::vector<int32_t> key;
  int64_t total = 0;
  for (int32_t root = 0; root < s.num_roots; ++root) {
    keys.clear();
    for (int32_t r = s.root_row_offsets[root]; r < s.root_row_offsets[root + 1]; ++r) {
      TerminalSequenceKey(s, s.row_seq[r], &key);
      keys.insert(key);
    }
    total += static_cast<int64_t>(keys.size());
  }
  return total;
}

}  // namespace cfgmask
