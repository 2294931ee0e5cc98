// The store file's reader: opening checks the header, the index part's
// checksum and every index the runtime follows against its table (Validate),
// including every row's token ids, so that no corruption can make the
// runtime read out of bounds; the checksum of the whole payload (the row
// payload's bytes: a flipped bit in a valid token id changes a mask, not
// memory safety) is computed only when asked (StoreReadOptions::verify,
// `cfgmask stats --verify`).  The file is read into a private snapshot
// (StoreArray views into it), so that a file replaced, truncated or
// rewritten in place never changes under a process that opened it.  The
// format (header, field order, checksums) is store_format.h, shared with the
// writer, which belongs to the compile driver
// (runtime/compile/store_writer.cc: atomic replacement, nothing
// half-written).  Tested by store_file_test.cc and
// tests/fuzz/store_file_fuzz.cc.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "maskstore/compiled_store.h"
#include "maskstore/store_format.h"

namespace cfgmask {
namespace {

class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  bool Pod(T* v) {
    if (n_ - off_ < sizeof(T)) return false;
    std::memcpy(v, p_ + off_, sizeof(T));
    off_ += sizeof(T);
    return true;
  }
  // An array becomes a view of the mapped bytes (p_ is 8-byte aligned).
  template <typename T>
  bool Vec(StoreArray<T>* v) {
    uint64_t n;
    if (!Align() || !Pod(&n) || n > (n_ - off_) / sizeof(T)) return false;
    *v = StoreArray<T>::View(reinterpret_cast<const T*>(p_ + off_), n);
    off_ += n * sizeof(T);
    return Align();
  }
  bool Align() {
    const size_t pad = (8 - off_ % 8) % 8;
    if (n_ - off_ < pad) return false;
    off_ += pad;
    return true;
  }
  bool Str(std::string* s) {
    uint64_t n;
    if (!Pod(&n) || n > n_ - off_) return false;
    s->assign(p_ + off_, n);
    off_ += n;
    return true;
  }
  bool Checksums(StoreArray<uint64_t>* v) { return Vec(v); }
  size_t offset() const { return off_; }
  bool done() const { return off_ == n_; }
  bool IndexEnd() {
    if (!Align()) return false;
    index_end = off_;
    return true;
  }
  size_t index_end = 0;

 private:
  const char* p_;
  size_t n_;
  size_t off_ = 0;
};

// The payload's fields (store_format.h's list) through a reader or a size
// counter.
template <typename IO>
bool Fields(IO& io, CompiledStore* s) {
  bool ok = true;
#define CFGMASK_STR(f) ok = ok && io.Str(&s->f);
#define CFGMASK_POD(f) ok = ok && io.Pod(&s->f);
#define CFGMASK_VEC(f) ok = ok && io.Vec(&s->f);
#define CFGMASK_STRINGS(f)                                    \
  {                                                          \
    uint64_t count = s->f.size();                            \
    ok = ok && io.Pod(&count);                               \
    if (!ok || count > kStoreMaxStrings) return false;       \
    s->f.resize(count);                                      \
    for (auto& one : s->f) ok = ok && io.Str(&one);          \
  }
#define CFGMASK_SUMS(f) ok = ok && io.Checksums(&s->f);
#define CFGMASK_INDEX_END() ok = ok && io.IndexEnd();
  CFGMASK_STORE_FIELDS(CFGMASK_STR, CFGMASK_POD, CFGMASK_VEC, CFGMASK_STRINGS, CFGMASK_SUMS,
                       CFGMASK_INDEX_END)
  return ok;
}

// Every index the runtime follows must be in range: a corrupted file whose
// checksum was forged must still not make the runtime read out of bounds.
// Beyond ranges, one property of the parse tables is checked because the
// runtime's stack pops rely on it: a reduction by a rule of length n in state
// p needs n states below p on every stack, i.e. every path of shifts and
// gotos from the start state to p has at least n edges (the LR(0) property
// that p's accessing sequences all end with the rule's right side).
bool Validate(const CompiledStore& s, std::string* why) {
  auto fail = [&](const char* what) {
    *why = what;
    return false;
  };
  auto offsets_ok = [](const StoreArray<int32_t>& off, size_t count, size_t data) {
    if (off.size() != count + 1 || off[0] != 0) return false;
    for (size_t i = 0; i + 1 < off.size(); ++i) {
      if (off[i] > off[i + 1]) return false;
    }
    return static_cast<size_t>(off.back()) <= data;
  };
  // Branch-free over 64-bit bounds, so that the compiler vectorises it (the
  // index part of a large store holds tens of MB of ids).
  auto all_in = [](const StoreArray<int32_t>& v, int64_t lo, int64_t hi) {
    const int32_t l = static_cast<int32_t>(std::clamp<int64_t>(lo, INT32_MIN, INT32_MAX));
    const int64_t h64 = std::clamp<int64_t>(hi, INT32_MIN, int64_t{INT32_MAX} + 1);
    const int32_t* p = v.data();
    const size_t n = v.size();
    int32_t bad = 0;
    if (h64 > INT32_MAX) {
      for (size_t i = 0; i < n; ++i) bad |= p[i] < l;
    } else {
      const int32_t h = static_cast<int32_t>(h64);
      for (size_t i = 0; i < n; ++i) bad |= (p[i] < l) | (p[i] >= h);
    }
    return lo <= INT32_MAX && hi > INT32_MIN && lo < hi ? bad == 0 : n == 0;
  };
  if (s.vocab_size <= 0 || s.num_terminals < 0 || s.num_states <= 0 ||
      s.num_nonterminals < 0 || s.num_lex_states <= 0 || s.num_roots < 0) {
    return fail("table sizes");
  }
  const size_t Q = s.num_lex_states, V = s.vocab_size;
  const int64_t T = s.num_terminals;
  if (s.token_offsets.size() != V + 1 || s.token_special.size() != V ||
      !offsets_ok(s.token_offsets, V, s.token_bytes.size())) {
    return fail("vocabulary tables");
  }
  if (!all_in(s.eos_ids, 0, V)) return fail("EOS ids");

  // Terminals.
  if (s.terminal_names.size() != static_cast<size_t>(T) || s.terminal_rank.size() != s.terminal_names.size() ||
      s.terminal_ignored.size() != s.terminal_names.size() ||
      s.terminal_open_paren.size() != s.terminal_names.size() ||
      s.terminal_close_paren.size() != s.terminal_names.size() ||
      s.terminal_is_string.size() != s.terminal_names.size() ||
      !offsets_ok(s.unless_offsets, T, s.unless_data.size()) || !all_in(s.unless_data, 0, T) ||
      s.terminal_next_any.size() != s.terminal_names.size() ||
      !offsets_ok(s.terminal_next_offsets, T, s.terminal_next_data.size()) ||
      !all_in(s.terminal_next_data, 0, T) ||
      s.terminal_min_bytes.size() != s.terminal_names.size() ||
      !all_in(s.terminal_min_bytes, 0, INT32_MAX)) {
    return fail("terminal tables");
  }
  const bool indenter = s.indenter_nl >= 0;
  for (int32_t t : {s.indenter_nl, s.indenter_indent, s.indenter_dedent}) {
    if (t < -1 || t >= T || (indenter && t < 0)) return fail("indenter terminals");
  }

  // Parser.
  const size_t P = s.num_states, A = s.num_parse_terminals, N = s.num_nonterminals;
  const int64_t R = static_cast<int64_t>(s.rule_lhs.size());
  if (s.num_parse_terminals != T + 1 || s.action.size() != P * A || s.goto_table.size() != P * N ||
      s.scanner_words != (T + 63) / 64 || s.scanner_alt.size() != P * s.scanner_words ||
      s.scanner_terms.size() != s.scanner_alt.size() || s.rule_length.size() != s.rule_lhs.size() ||
      s.start_state < 0 || static_cast<size_t>(s.start_state) >= P) {
    return fail("parse tables");
  }
  if (!all_in(s.rule_lhs, 0, N) || !all_in(s.rule_length, 0, INT32_MAX) ||
      !all_in(s.goto_table, -1, P)) {
    return fail("parse rules");
  }
  for (int32_t a : s.action) {
    if (!LrActionValid(a, static_cast<int64_t>(P), R)) return fail("parse actions");
  }
  {
    // Shortest stack (in states) on which each parser state can be on top.
    std::vector<int64_t> depth(P, -1);
    std::vector<int32_t> queue = {s.start_state};
    depth[s.start_state] = 1;
    for (size_t head = 0; head < queue.size(); ++head) {
      const int32_t p = queue[head];
      auto visit = [&](int32_t q) {
        if (q >= 0 && depth[q] < 0) {
          depth[q] = depth[p] + 1;
          queue.push_back(q);
        }
      };
      const LrTables lr = s.lr();
      for (size_t t = 0; t < A; ++t) visit(lr.ShiftTo(p, t));
      for (size_t k = 0; k < N; ++k) visit(lr.Goto(p, k));
    }
    for (size_t p = 0; p < P; ++p) {
      if (depth[p] < 0) continue;  // never on a stack
      const LrTables lr = s.lr();
      for (size_t t = 0; t < A; ++t) {
        const int32_t r = lr.ReduceBy(p, t);
        if (r >= 0 && s.rule_length[r] >= depth[p]) {
          return fail("parse actions (reduction deeper than the stack)");
        }
      }
    }
  }

  // Items, sets and sequences.
  const size_t NI = s.item_kind.size();
  size_t nseq = s.seq_offsets.empty() ? 0 : s.seq_offsets.size() - 1;
  size_t nset = s.set_offsets.empty() ? 0 : s.set_offsets.size() - 1;
  if (!offsets_ok(s.seq_offsets, nseq, s.seq_data.size()) ||
      !offsets_ok(s.set_offsets, nset, s.set_data.size()) || !all_in(s.seq_data, 0, NI) ||
      nseq == 0) {
    return fail("sequence tables");
  }
  auto terminal_set = [&](int32_t set) {
    if (set < 0 || static_cast<size_t>(set) >= nset) return false;
    for (int32_t i = s.set_offsets[set]; i < s.set_offsets[set + 1]; ++i) {
      if (s.set_data[i] < 0 || s.set_data[i] >= T) return false;
    }
    return true;
  };
  if (s.item_terminal.size() != NI || s.item_blockers.size() != NI || s.item_full.size() != NI ||
      s.item_col_abs.size() != NI || s.item_col.size() != NI || s.item_slot.size() != NI) {
    return fail("items");
  }
  for (size_t i = 0; i < NI; ++i) {
    const int32_t raw = s.item_kind[i];
    if (raw < static_cast<int32_t>(ItemKind::kEmit) || raw > static_cast<int32_t>(ItemKind::kTail)) {
      return fail("items");
    }
    const ItemKind kind = s.KindOf(static_cast<int32_t>(i));
    // A Tail item names no terminal (-1): its terminals are its sets.
    if (s.item_terminal[i] < (kind == ItemKind::kTail ? -1 : 0) || s.item_terminal[i] >= T) {
      return fail("items");
    }
    if (kind == ItemKind::kHit && (s.item_slot[i] < 0 || s.item_slot[i] > 0xFFFF)) {
      return fail("item slots");
    }
    // A Tail's slot is a terminal set (a lexer mode's foreign terminals) or -1.
    if (kind == ItemKind::kTail && s.item_slot[i] != -1 && !terminal_set(s.item_slot[i])) {
      return fail("item terminal sets");
    }
    if (kind != ItemKind::kHit &&
        (!terminal_set(s.item_blockers[i]) || !terminal_set(s.item_full[i]))) {
      return fail("item terminal sets");
    }
  }

  // Frozen lexer states.
  if (s.initial_lex_state < 0 || static_cast<size_t>(s.initial_lex_state) >= Q ||
      !offsets_ok(s.step_offsets, Q, s.step_byte.size()) ||
      s.step_to.size() != s.step_byte.size() || s.step_hits.size() != s.step_byte.size() ||
      !offsets_ok(s.cand_offsets, Q, s.cand_terminal.size()) ||
      s.cand_to.size() != s.cand_terminal.size() || s.cand_item.size() != s.cand_terminal.size() ||
      !offsets_ok(s.eof_offsets, Q, s.eof_seq.size()) ||
      !offsets_ok(s.root_row_offsets, s.num_roots, s.row_seq.size()) ||
      s.compact_to.size() != Q || s.root_index.size() != Q || s.compact_map.size() != Q ||
      s.tail_item.size() != Q || s.num_slots.size() != Q || s.at_start.size() != Q) {
    return fail("lexer tables");
  }
  if (!all_in(s.step_to, 0, Q) || !all_in(s.cand_to, 0, Q) || !all_in(s.compact_to, -1, Q)) {
    return fail("lexer transitions");
  }
  if (!all_in(s.step_byte, 0, 256) || !all_in(s.step_hits, 0, nseq) ||
      !all_in(s.cand_terminal, 0, T) || !all_in(s.cand_item, 0, NI) ||
      !all_in(s.eof_seq, 0, nseq) || !all_in(s.root_index, -1, s.num_roots) ||
      !all_in(s.tail_item, -1, NI) || !all_in(s.compact_map, 0, nset)) {
    return fail("lexer state items");
  }
  for (int32_t i : s.tail_item) {
    if (i >= 0 && s.KindOf(i) != ItemKind::kTail) return fail("lexer state items");
  }
  for (int32_t map : s.compact_map) {
    for (int32_t i = s.set_offsets[map]; i < s.set_offsets[map + 1]; ++i) {
      if (s.set_data[i] < 0) return fail("slot maps");
    }
  }

  // The mask store's tables; the rows themselves are checked per root on
  // first use (CompiledStore::CheckRootRows).
  const size_t rows = s.row_seq.size();
  if (s.row_kind.size() != rows || s.row_offset.size() != rows || s.row_length.size() != rows) {
    return fail("rows");
  }
  if (!offsets_ok(s.root_sim_offsets, s.num_roots, s.sim_token.size()) ||
      static_cast<size_t>(s.root_sim_offsets.back()) != s.sim_token.size() ||
      s.sim_row.size() != s.sim_token.size() || !all_in(s.sim_token, 0, V) ||
      !all_in(s.sim_row, s.root_row_offsets.back(), static_cast<int64_t>(rows))) {
    return fail("simulated tokens");
  }
  if (s.root_row_checksum.size() != static_cast<size_t>(s.num_roots)) return fail("row checksums");
  return true;
}

// One row's sequence id, kind, payload range and token ids.
bool RowOk(const CompiledStore& s, size_t r) {
  const size_t nseq = s.seq_offsets.size() - 1;
  const int32_t seq = s.row_seq[r], kind = s.row_kind[r], off = s.row_offset[r],
                len = s.row_length[r];
  if (seq < 0 || static_cast<size_t>(seq) >= nseq || kind < 0 || kind > 2 || off < 0 || len < 0) {
    return false;
  }
  const size_t end = static_cast<size_t>(off) + static_cast<size_t>(len);
  if (kind == 2) return end <= s.row_bits.size() && len <= s.mask_words();
  if (end > s.row_tokens.size()) return false;
  int32_t bad = 0;  // branch-free, so that the compiler vectorises it
  for (size_t i = static_cast<size_t>(off); i < end; ++i) {
    bad |= (s.row_tokens[i] < 0) | (s.row_tokens[i] >= s.vocab_size);
  }
  return bad == 0;
}

}  // namespace

std::string StoreFileHeaderFor(const std::string& payload) {
  // The payload's own identity and index part where it parses that far.
  CompiledStore s;
  Reader r(payload.data(), payload.size());
  Fields(r, &s);
  const size_t index_end = std::min(r.index_end, payload.size());
  StoreFileHeader h;
  std::memcpy(h.magic, kStoreMagic, sizeof(h.magic));
  h.format = kStoreFormatVersion;
  h.cfgmask_version = kCfgmaskVersion;
  h.tokenizer_identity = s.tokenizer_identity;
  h.payload_bytes = payload.size();
  h.payload_checksum = StoreChecksum(payload.data(), payload.size());
  h.index_bytes = index_end;
  h.index_checksum = StoreChecksum(payload.data(), index_end);
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

Status ReadStoreFile(const std::string& path, CompiledStore* out) {
  return ReadStoreFile(path, out, StoreReadOptions());
}

Status ReadStoreFile(const std::string& path, CompiledStore* out, const StoreReadOptions& options) {
  // A FIFO or a device would block or never end: refused before opening
  // (O_NONBLOCK too, and checked again on the descriptor, in case the name
  // changed in between).
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status(ErrorCode::kIo, path + ": is a directory, not a store file");
  }
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kIo, path + ": is not a regular file (a FIFO, socket or device)");
  }
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status(ErrorCode::kIo, path + ": cannot open: " + std::strerror(errno));
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Status(ErrorCode::kIo, path + ": cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status(ErrorCode::kIo, path + ": is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t version_end = offsetof(StoreFileHeader, tokenizer_identity);  // magic, versions
  const size_t header_size = sizeof(StoreFileHeader);
  if (size < version_end) {
    close(fd);
    return Status(ErrorCode::kStoreFile,
                  path + ":0: not a cfgmask store (file of " + std::to_string(size) + " bytes)");
  }
  // A private snapshot: the file is read into anonymous memory of this
  // process, never mapped, so that nothing done to the file afterwards (cp
  // over it, truncate, a rewrite in place) can change or unmap what a
  // session reads (a mapped file that shrinks raises SIGBUS; rewritten in
  // place, it changes under checks already made).  A file changing while it
  // is read fails its checksums (index part on open, rows per root).
  // CFGMASK_STORE_OPEN=map maps the file instead (MAP_PRIVATE, zero-copy:
  // opening in milliseconds, pages shared between processes) for operators
  // who only ever replace store files atomically (rename, a later compile),
  // never in place: a mapped file truncated or rewritten kills the process.
  const char* open_mode = std::getenv("CFGMASK_STORE_OPEN");
  const bool map_file = open_mode != nullptr && std::strcmp(open_mode, "map") == 0;
  void* map = map_file
                  ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0)
                  : mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    close(fd);
    return Status(ErrorCode::kResourceLimit,
                  path + ": cannot " + (map_file ? "map " : "allocate ") + std::to_string(size) +
                      " bytes for the store");
  }
  std::shared_ptr<const void> mapping(map, [size](const void* m) {
    munmap(const_cast<void*>(m), size);
  });
  for (size_t done = 0; !map_file && done < size;) {
    const ssize_t n = pread(fd, static_cast<char*>(map) + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      close(fd);
      return Status(ErrorCode::kStoreFile,
                    path + ":" + std::to_string(done) + ": " +
                        (n < 0 ? std::string("read failed: ") + std::strerror(err)
                               : std::string("the file shrank while being read")));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (!map_file) mprotect(map, size, PROT_READ);
  const char* p = static_cast<const char*>(map);
  if (std::memcmp(p, kStoreMagic, 8) != 0) {
    return Status(ErrorCode::kStoreFile, path + ":0: not a cfgmask store (bad magic)");
  }
  Reader h(p + 8, size - 8);
  uint32_t format = 0, version = 0;
  h.Pod(&format);
  h.Pod(&version);
  if (format != kStoreFormatVersion || version != kCfgmaskVersion) {
    return Status(ErrorCode::kStoreFile,
                  path + ":8: store format " + std::to_string(format) + " from cfgmask " +
                      std::to_string(version) + "; this cfgmask reads format " +
                      std::to_string(kStoreFormatVersion) + " from cfgmask " +
                      std::to_string(kCfgmaskVersion) + ": recompile the grammar");
  }
  if (size < header_size) {
    return Status(ErrorCode::kStoreFile, path + ":" + std::to_string(size) +
                                             ": truncated store header (" + std::to_string(size) +
                                             " bytes)");
  }
  uint64_t identity = 0, payload = 0, checksum = 0, index_bytes = 0, index_checksum = 0;
  h.Pod(&identity);
  h.Pod(&payload);
  h.Pod(&checksum);
  h.Pod(&index_bytes);
  h.Pod(&index_checksum);
  if (payload != size - header_size) {
    return Status(ErrorCode::kStoreFile,
                  path + ":" + std::to_string(size) + ": truncated or padded store (" +
                      std::to_string(size - header_size) + " payload bytes, header says " +
                      std::to_string(payload) + ")");
  }
  if (index_bytes > payload || StoreChecksum(p + header_size, index_bytes) != index_checksum) {
    return Status(ErrorCode::kStoreFile, path + ":" + std::to_string(header_size) +
                                             ": checksum mismatch in the store's index "
                                             "(corrupted store)");
  }
  if (options.verify && StoreChecksum(p + header_size, payload) != checksum) {
    return Status(ErrorCode::kStoreFile, path + ":" + std::to_string(header_size) +
                                             ": checksum mismatch (corrupted store)");
  }
  Reader r(p + header_size, payload);
  CompiledStore s;
  if (!Fields(r, &s) || !r.Align() || !r.done() || r.index_end != index_bytes) {
    return Status(ErrorCode::kStoreFile, path + ":" + std::to_string(header_size + r.offset()) +
                                             ": malformed store payload");
  }
  std::string why;
  if (!Validate(s, &why) || s.tokenizer_identity != identity) {
    return Status(ErrorCode::kStoreFile,
                  path + ": inconsistent store (" + (why.empty() ? "identity" : why) + ")");
  }
  s.mapping = std::move(mapping);
  s.row_check = std::make_shared<CompiledStore::RowCheck>(static_cast<size_t>(s.num_roots));
  s.ComputeViability();
  if (options.verify && !s.AllRowsOk()) {
    return Status(ErrorCode::kStoreFile, path + ": inconsistent store (rows)");
  }
  *out = std::move(s);
  return Status::Ok();
}

bool CompiledStore::CheckRootRows(int32_t root) const {
  bool ok = true;
  for (int32_t r = root_row_offsets[root]; ok && r < root_row_offsets[root + 1]; ++r) {
    ok = RowOk(*this, static_cast<size_t>(r));
  }
  for (int32_t i = root_sim_offsets[root]; ok && i < root_sim_offsets[root + 1]; ++i) {
    ok = RowOk(*this, static_cast<size_t>(sim_row[i]));
  }
  // In range, and the bytes written: a flipped bit that leaves every id in
  // range (a different token) is caught here, before the root's first mask.
  // The checksums are the file's: rows changed in memory since (a loaded
  // store streamlined or edited: its arrays are then owned copies, no
  // longer views of the file) are trusted as a store built in memory is.
  const bool rows_as_read = row_seq.is_view() && row_kind.is_view() && row_offset.is_view() &&
                            row_length.is_view() && row_tokens.is_view() && row_bits.is_view() &&
                            root_row_offsets.is_view() && root_sim_offsets.is_view() &&
                            sim_row.is_view() && root_row_checksum.is_view();
  ok = ok && (!rows_as_read || RootRowsChecksum(*this, root) == root_row_checksum[root]);
  row_check->state[root].store(ok ? 1 : 2, std::memory_order_release);
  return ok;
}

std::string DamagedRowsMessage() {
  return "the store's rows are damaged (a row's checksum or ids are wrong): recompile it, or "
         "check it with cfgmask stats --verify";
}

void CompiledStore::ComputeViability() {
  viability = StackViability::Build(lr(), start_state, StackViabilityLimits{}, nullptr);
}

bool CompiledStore::AllRowsOk() const {
  bool ok = true;
  for (int32_t root = 0; root < num_roots; ++root) ok = RootRowsOk(root) && ok;
  return ok;
}

namespace {
// Fields() visitor summing the bytes of owned (not mapped) arrays.
struct OwnedCounter {
  size_t n = 0;
  template <typename T>
  bool Pod(T*) {
    return true;
  }
  bool IndexEnd() { return true; }
  template <typename T>
  bool Vec(StoreArray<T>* v) {
    if (!v->is_view()) n += v->size() * sizeof(T);
    return true;
  }
  bool Checksums(StoreArray<uint64_t>* v) { return Vec(v); }
  bool Str(std::string* s) {
    n += s->size();
    return true;
  }
};
}  // namespace

// Fields() visitor counting the payload's bytes as written (alignment
// included).
struct SizeCounter {
  const CompiledStore* store;
  size_t n = 0;
  void Align() { n += (8 - n % 8) % 8; }
  template <typename T>
  bool Pod(T*) {
    n += sizeof(T);
    return true;
  }
  bool IndexEnd() {
    Align();
    return true;
  }
  template <typename T>
  bool Vec(StoreArray<T>* v) {
    Align();
    n += sizeof(uint64_t) + v->size() * sizeof(T);
    Align();
    return true;
  }
  // As written: one checksum per root.
  bool Checksums(StoreArray<uint64_t>*) {
    Align();
    n += sizeof(uint64_t) + static_cast<size_t>(std::max(store->num_roots, 0)) * sizeof(uint64_t);
    Align();
    return true;
  }
  bool Str(std::string* s) {
    n += sizeof(uint64_t) + s->size();
    return true;
  }
};

size_t CompiledStore::MemoryBytes() const {
  SizeCounter c{this};
  Fields(c, const_cast<CompiledStore*>(this));
  return c.n;
}

size_t CompiledStore::OwnedBytes() const {
  OwnedCounter c;
  Fields(c, const_cast<CompiledStore*>(this));
  return c.n;
}

}  // namespace cfgmask
