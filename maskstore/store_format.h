// The store file's format, defined once for its reader (store_file.cc) and
// its writer (runtime/compile/store_writer.cc):
//
//  - the header (StoreFileHeader): magic, format version, cfgmask version,
//    tokenizer identity, payload size, a checksum of the whole payload, the
//    size of its index part and a checksum of that part;
//  - the payload: every field of CompiledStore in the fixed order of
//    CFGMASK_STORE_FIELDS, each array as a 64-bit element count and its raw
//    little-endian bytes, both at 8-byte aligned offsets, so that the reader
//    points the store's arrays into the bytes it read.  The index part is
//    everything before the row arrays (CFGMASK_STORE_FIELDS's INDEX_END);
//  - the checksums: StoreChecksum over bytes, and per root the checksum of
//    its rows (RootRowsChecksum).
//
// Tested by store_file_test.cc and tests/fuzz/store_file_fuzz.cc.
#ifndef CFGMASK_MASKSTORE_STORE_FORMAT_H_
#define CFGMASK_MASKSTORE_STORE_FORMAT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "maskstore/compiled_store.h"

namespace cfgmask {

constexpr char kStoreMagic[8] = {'C', 'F', 'G', 'M', 'A', 'S', 'K', '\n'};
constexpr uint32_t kCfgmaskVersion = 1;  // bumped with every release

// The header, in file order (little-endian, no padding).
struct StoreFileHeader {
  char magic[8];
  uint32_t format;           // kStoreFormatVersion
  uint32_t cfgmask_version;  // kCfgmaskVersion
  uint64_t tokenizer_identity;
  uint64_t payload_bytes;
  uint64_t payload_checksum;  // StoreChecksum of the whole payload
  uint64_t index_bytes;       // the index part: the payload before the rows
  uint64_t index_checksum;    // StoreChecksum of the index part
};
static_assert(sizeof(StoreFileHeader) == 56, "the store header is 56 bytes");
static_assert(offsetof(StoreFileHeader, tokenizer_identity) == 16,
              "magic and versions come first");

// The payload's fields in file order, for both directions: each user defines
// the six macros it is given (one statement per field) and expands the list
// in its own code.
//   STR(f)        a std::string: 64-bit length, then its bytes
//   POD(f)        a trivially copyable value, its raw bytes
//   VEC(f)        a StoreArray: 8-byte align, 64-bit count, elements, align
//   STRINGS(f)    a std::vector<std::string>: 64-bit count (a reader refuses
//                 more than kStoreMaxStrings), then each as STR
//   SUMS(f)       root_row_checksum, as VEC: the writer computes it from the
//                 rows it writes (RootRowsChecksum)
//   INDEX_END()   8-byte align; the index part ends here, the rows follow
#define CFGMASK_STORE_FIELDS(STR, POD, VEC, STRINGS, SUMS, INDEX_END)                            \
  STR(grammar_name) STR(start) STR(tokenizer_name)                                              \
  POD(tokenizer_identity) POD(vocab_size)                                                       \
  VEC(token_offsets) VEC(token_bytes) VEC(token_special) VEC(eos_ids)                           \
  POD(num_terminals)                                                                            \
  STRINGS(terminal_names)                                                                       \
  VEC(terminal_rank) VEC(terminal_ignored) VEC(terminal_open_paren) VEC(terminal_close_paren)   \
  VEC(terminal_is_string) VEC(unless_offsets) VEC(unless_data)                                  \
  VEC(terminal_next_any) VEC(terminal_next_offsets) VEC(terminal_next_data)                     \
  VEC(terminal_min_bytes)                                                                       \
  POD(indenter_nl) POD(indenter_indent) POD(indenter_dedent) POD(indenter_tab_len)              \
  POD(num_states) POD(num_parse_terminals) POD(num_nonterminals) POD(start_state)               \
  VEC(action) VEC(goto_table) VEC(rule_lhs) VEC(rule_length)                                    \
  POD(scanner_words) VEC(scanner_terms) VEC(scanner_alt)                                        \
  VEC(item_kind) VEC(item_terminal) VEC(item_blockers) VEC(item_full) VEC(item_col_abs)         \
  VEC(item_col) VEC(item_slot)                                                                  \
  VEC(set_offsets) VEC(set_data) VEC(seq_offsets) VEC(seq_data)                                 \
  POD(num_lex_states) POD(initial_lex_state)                                                    \
  VEC(step_offsets) VEC(step_byte) VEC(step_to) VEC(step_hits)                                  \
  VEC(cand_offsets) VEC(cand_terminal) VEC(cand_to) VEC(cand_item)                              \
  VEC(compact_to) VEC(compact_map) VEC(num_slots) VEC(at_start) VEC(eof_offsets) VEC(eof_seq)   \
  VEC(root_index) VEC(tail_item)                                                                \
  POD(num_roots) VEC(root_row_offsets)                                                          \
  VEC(root_sim_offsets) VEC(sim_token) VEC(sim_row)                                             \
  SUMS(root_row_checksum)                                                                       \
  POD(stats)                                                                                    \
  INDEX_END()                                                                                   \
  VEC(row_seq) VEC(row_kind) VEC(row_offset) VEC(row_length) VEC(row_tokens) VEC(row_bits)

constexpr uint64_t kStoreMaxStrings = 1000000;  // terminal names a reader accepts

// FNV-1a over 64-bit little-endian words in four interleaved lanes (then the
// tail bytes), the lanes folded at the end: the same mixing as FNV-1a 64 but
// four independent multiply chains, so it runs at memory speed instead of one
// multiply per byte.
inline uint64_t StoreChecksum(const char* data, size_t n) {
  constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t h[4] = {1469598103934665603ull, 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
                   0x165667b19e3779f9ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, data + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * kPrime;
    }
  }
  uint64_t r = h[0];
  for (int l = 1; l < 4; ++l) r = (r ^ h[l]) * kPrime;
  for (; i < n; ++i) r = (r ^ static_cast<unsigned char>(data[i])) * kPrime;
  return (r ^ n) * kPrime;
}

// StoreChecksum of bytes given in pieces (a writer that streams the payload
// to its file): Add the pieces in order, then Value() equals StoreChecksum
// of their concatenation; Value() leaves the state as it is, so a prefix's
// checksum can be read on the way.
class StreamChecksum {
 public:
  void Add(const char* data, size_t n) {
    total_ += n;
    if (pending_ > 0) {
      const size_t take = std::min(n, size_t{32} - pending_);
      std::memcpy(buf_ + pending_, data, take);
      pending_ += take;
      data += take;
      n -= take;
      if (pending_ < 32) return;
      Block(buf_);
      pending_ = 0;
    }
    for (; n >= 32; data += 32, n -= 32) Block(data);
    std::memcpy(buf_, data, n);
    pending_ = n;
  }
  uint64_t Value() const {
    constexpr uint64_t kPrime = 1099511628211ull;
    uint64_t r = h_[0];
    for (int l = 1; l < 4; ++l) r = (r ^ h_[l]) * kPrime;
    for (size_t i = 0; i < pending_; ++i) r = (r ^ static_cast<unsigned char>(buf_[i])) * kPrime;
    return (r ^ total_) * kPrime;
  }

 private:
  void Block(const char* p) {
    constexpr uint64_t kPrime = 1099511628211ull;
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + 8 * l, 8);
      h_[l] = (h_[l] ^ w) * kPrime;
    }
  }
  uint64_t h_[4] = {1469598103934665603ull, 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
                    0x165667b19e3779f9ull};
  char buf_[32];
  size_t pending_ = 0;
  uint64_t total_ = 0;
};

// The checksum of one root's rows (CompiledStore::root_row_checksum): the
// rows' four fields over the root's range, then each row's payload, then its
// simulated tokens' rows.  The reader checks the ranges (RowOk) before it
// compares a checksum; the writer may be handed tables whose ranges are
// wrong (a forged or damaged store written back), so whatever lies outside
// the arrays is left out of the sum here rather than read: the reader then
// refuses those rows by their ranges.
inline uint64_t RowChecksum(const CompiledStore& s, int64_t r, uint64_t h) {
  constexpr uint64_t kPrime = 1099511628211ull;
  const size_t rows = std::min({s.row_seq.size(), s.row_kind.size(), s.row_offset.size(),
                                s.row_length.size()});
  if (r < 0 || static_cast<size_t>(r) >= rows) return (h ^ static_cast<uint64_t>(r)) * kPrime;
  const int32_t fields[4] = {s.row_seq[r], s.row_kind[r], s.row_offset[r], s.row_length[r]};
  h = (h ^ StoreChecksum(reinterpret_cast<const char*>(fields), sizeof(fields))) * kPrime;
  if (s.row_offset[r] < 0 || s.row_length[r] <= 0) return h;
  const size_t off = static_cast<size_t>(s.row_offset[r]), len = static_cast<size_t>(s.row_length[r]);
  const bool bitset = s.row_kind[r] == static_cast<int32_t>(RowKind::kBitset);
  const size_t size = bitset ? s.row_bits.size() : s.row_tokens.size();
  if (off > size || len > size - off) return h;
  const char* payload = bitset ? reinterpret_cast<const char*>(s.row_bits.data() + off)
                               : reinterpret_cast<const char*>(s.row_tokens.data() + off);
  return (h ^ StoreChecksum(payload, len * 4)) * kPrime;
}

inline uint64_t RootRowsChecksum(const CompiledStore& s, int32_t root) {
  uint64_t h = 0x6a09e667f3bcc908ull ^ static_cast<uint64_t>(root);
  if (static_cast<size_t>(root) + 1 < s.root_row_offsets.size()) {
    for (int32_t r = s.root_row_offsets[root]; r < s.root_row_offsets[root + 1]; ++r) {
      h = RowChecksum(s, r, h);
    }
  }
  if (static_cast<size_t>(root) + 1 < s.root_sim_offsets.size()) {
    for (int32_t i = s.root_sim_offsets[root]; i < s.root_sim_offsets[root + 1]; ++i) {
      h = RowChecksum(s, i >= 0 && static_cast<size_t>(i) < s.sim_row.size() ? s.sim_row[i] : -1,
                      h);
    }
  }
  return h;
}

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_STORE_FORMAT_H_
