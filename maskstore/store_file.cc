// The store file: a header (magic, format version, cfgmask version, tokenizer
// identity, payload size, FNV-1a 64 checksum of the payload) followed by the
// payload: every field of CompiledStore in a fixed order, each array as a
// 64-bit element count and its raw little-endian bytes.  The file is read
// with mmap and validated (size, checksum, version, every count against the
// bytes left) before a single field is trusted; the writer writes to a
// temporary file in the same folder and renames it, so a killed compile never
// leaves a partial store.  Tested by store_file_test.cc.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "maskstore/compiled_store.h"

namespace cfgmask {
namespace {

constexpr char kMagic[8] = {'C', 'F', 'G', 'M', 'A', 'S', 'K', '\n'};
constexpr uint32_t kCfgmaskVersion = 1;  // bumped with every release

uint64_t Fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

class Writer {
 public:
  template <typename T>
  void Pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    Pod<uint64_t>(v.size());
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    out.append(s);
  }
  std::string out;
};

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
  template <typename T>
  bool Vec(std::vector<T>* v) {
    uint64_t n;
    if (!Pod(&n) || n > (n_ - off_) / sizeof(T)) return false;
    v->resize(n);
    std::memcpy(v->data(), p_ + off_, n * sizeof(T));
    off_ += n * sizeof(T);
    return true;
  }
  bool Str(std::string* s) {
    uint64_t n;
    if (!Pod(&n) || n > n_ - off_) return false;
    s->assign(p_ + off_, n);
    off_ += n;
    return true;
  }
  size_t offset() const { return off_; }
  bool done() const { return off_ == n_; }

 private:
  const char* p_;
  size_t n_;
  size_t off_ = 0;
};

// One list of fields for both directions.
template <typename IO>
bool Fields(IO& io, CompiledStore* s) {
  bool ok = true;
  ok = ok && io.Str(&s->grammar_name) && io.Str(&s->start) && io.Str(&s->tokenizer_name);
  ok = ok && io.Pod(&s->tokenizer_identity) && io.Pod(&s->vocab_size);
  ok = ok && io.Vec(&s->token_offsets) && io.Str(&s->token_bytes) && io.Vec(&s->token_special) &&
       io.Vec(&s->eos_ids);
  ok = ok && io.Pod(&s->num_terminals);
  uint64_t names = s->terminal_names.size();
  ok = ok && io.Pod(&names);
  if (!ok || names > 1000000) return false;
  s->terminal_names.resize(names);
  for (auto& n : s->terminal_names) ok = ok && io.Str(&n);
  ok = ok && io.Vec(&s->terminal_rank) && io.Vec(&s->terminal_ignored) &&
       io.Vec(&s->terminal_open_paren) && io.Vec(&s->terminal_close_paren) &&
       io.Vec(&s->terminal_is_string) && io.Vec(&s->unless_offsets) && io.Vec(&s->unless_data);
  ok = ok && io.Pod(&s->indenter_nl) && io.Pod(&s->indenter_indent) &&
       io.Pod(&s->indenter_dedent) && io.Pod(&s->indenter_tab_len);
  ok = ok && io.Pod(&s->num_states) && io.Pod(&s->num_parse_terminals) &&
       io.Pod(&s->num_nonterminals) && io.Pod(&s->start_state);
  ok = ok && io.Vec(&s->action) && io.Vec(&s->goto_table) && io.Vec(&s->rule_lhs) &&
       io.Vec(&s->rule_length);
  ok = ok && io.Pod(&s->scanner_words) && io.Vec(&s->scanner_terms) && io.Vec(&s->scanner_alt);
  ok = ok && io.Vec(&s->item_kind) && io.Vec(&s->item_terminal) && io.Vec(&s->item_blockers) &&
       io.Vec(&s->item_full) && io.Vec(&s->item_col_abs) && io.Vec(&s->item_col) &&
       io.Vec(&s->item_slot);
  ok = ok && io.Vec(&s->set_offsets) && io.Vec(&s->set_data) && io.Vec(&s->seq_offsets) &&
       io.Vec(&s->seq_data);
  ok = ok && io.Pod(&s->num_lex_states) && io.Pod(&s->initial_lex_state);
  ok = ok && io.Vec(&s->step_offsets) && io.Vec(&s->step_byte) && io.Vec(&s->step_to) &&
       io.Vec(&s->step_hits);
  ok = ok && io.Vec(&s->cand_offsets) && io.Vec(&s->cand_terminal) && io.Vec(&s->cand_to) &&
       io.Vec(&s->cand_item);
  ok = ok && io.Vec(&s->compact_to) && io.Vec(&s->compact_map) && io.Vec(&s->num_slots) &&
       io.Vec(&s->at_start) && io.Vec(&s->eof_offsets) && io.Vec(&s->eof_seq) &&
       io.Vec(&s->root_index) && io.Vec(&s->tail_item);
  ok = ok && io.Pod(&s->num_roots) && io.Vec(&s->root_row_offsets) && io.Vec(&s->row_seq) &&
       io.Vec(&s->row_kind) && io.Vec(&s->row_offset) && io.Vec(&s->row_length) &&
       io.Vec(&s->row_tokens) && io.Vec(&s->row_bits);
  ok = ok && io.Pod(&s->stats);
  return ok;
}

struct ConstWriter {
  Writer* w;
  template <typename T>
  bool Pod(T* v) {
    w->Pod(*v);
    return true;
  }
  template <typename T>
  bool Vec(std::vector<T>* v) {
    w->Vec(*v);
    return true;
  }
  bool Str(std::string* s) {
    w->Str(*s);
    return true;
  }
};

// Every index the runtime follows must be in range: a corrupted file whose
// checksum was forged must still not make the runtime read out of bounds.
bool Validate(const CompiledStore& s, std::string* why) {
  auto offsets_ok = [](const std::vector<int32_t>& off, size_t count, size_t data) {
    if (off.size() != count + 1 || off[0] != 0) return false;
    for (size_t i = 0; i + 1 < off.size(); ++i) {
      if (off[i] > off[i + 1]) return false;
    }
    return static_cast<size_t>(off.back()) <= data;
  };
  const size_t Q = s.num_lex_states, V = s.vocab_size;
  if (s.vocab_size <= 0 || s.token_offsets.size() != V + 1 || s.token_special.size() != V) {
    *why = "vocabulary tables";
    return false;
  }
  if (static_cast<size_t>(s.token_offsets.back()) > s.token_bytes.size()) {
    *why = "token bytes";
    return false;
  }
  for (int32_t e : s.eos_ids) {
    if (e < 0 || static_cast<size_t>(e) >= V) {
      *why = "EOS ids";
      return false;
    }
  }
  if (s.num_states <= 0 || s.num_parse_terminals != s.num_terminals + 1 ||
      s.action.size() != static_cast<size_t>(s.num_states) * s.num_parse_terminals ||
      s.goto_table.size() != static_cast<size_t>(s.num_states) * s.num_nonterminals ||
      s.scanner_alt.size() != static_cast<size_t>(s.num_states) * s.scanner_words ||
      s.scanner_terms.size() != s.scanner_alt.size() || s.rule_lhs.size() != s.rule_length.size()) {
    *why = "parse tables";
    return false;
  }
  for (int32_t a : s.action) {
    if (a > s.num_states || (a < 0 && a != INT32_MIN && -(a + 1) >= (int32_t)s.rule_lhs.size())) {
      *why = "parse actions";
      return false;
    }
  }
  if (!offsets_ok(s.step_offsets, Q, s.step_byte.size()) ||
      !offsets_ok(s.cand_offsets, Q, s.cand_terminal.size()) ||
      !offsets_ok(s.eof_offsets, Q, s.eof_seq.size()) ||
      !offsets_ok(s.root_row_offsets, s.num_roots, s.row_seq.size()) ||
      s.compact_to.size() != Q || s.root_index.size() != Q || s.compact_map.size() != Q ||
      s.tail_item.size() != Q || s.terminal_is_string.size() != (size_t)s.num_terminals ||
      !offsets_ok(s.unless_offsets, s.num_terminals, s.unless_data.size())) {
    *why = "lexer tables";
    return false;
  }
  for (int32_t t : s.step_to) {
    if (t < 0 || static_cast<size_t>(t) >= Q) {
      *why = "lexer transitions";
      return false;
    }
  }
  size_t nseq = s.seq_offsets.empty() ? 0 : s.seq_offsets.size() - 1;
  size_t nset = s.set_offsets.empty() ? 0 : s.set_offsets.size() - 1;
  if (!offsets_ok(s.seq_offsets, nseq, s.seq_data.size()) ||
      !offsets_ok(s.set_offsets, nset, s.set_data.size())) {
    *why = "sequence tables";
    return false;
  }
  for (int32_t seq : s.row_seq) {
    if (seq < 0 || static_cast<size_t>(seq) >= nseq) {
      *why = "rows";
      return false;
    }
  }
  for (size_t r = 0; r < s.row_kind.size(); ++r) {
    size_t end = static_cast<size_t>(s.row_offset[r]) + s.row_length[r];
    if (s.row_kind[r] == 2 ? end > s.row_bits.size() : end > s.row_tokens.size()) {
      *why = "row payload";
      return false;
    }
  }
  return true;
}

}  // namespace

size_t CompiledStore::MemoryBytes() const {
  Writer w;
  ConstWriter cw{&w};
  Fields(cw, const_cast<CompiledStore*>(this));
  return w.out.size();
}

Status WriteStoreFile(const CompiledStore& store, const std::string& path) {
  Writer payload;
  ConstWriter cw{&payload};
  Fields(cw, const_cast<CompiledStore*>(&store));
  Writer header;
  header.out.append(kMagic, 8);
  header.Pod(kStoreFormatVersion);
  header.Pod(kCfgmaskVersion);
  header.Pod(store.tokenizer_identity);
  header.Pod<uint64_t>(payload.out.size());
  header.Pod(Fnv1a(payload.out.data(), payload.out.size()));
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status(ErrorCode::kIo, path + ": cannot write: " + std::strerror(errno));
  bool ok = std::fwrite(header.out.data(), 1, header.out.size(), f) == header.out.size() &&
            std::fwrite(payload.out.data(), 1, payload.out.size(), f) == payload.out.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (fsync(fileno(f)) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status(ErrorCode::kIo, path + ": write failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

Status ReadStoreFile(const std::string& path, CompiledStore* out) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status(ErrorCode::kIo, path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Status(ErrorCode::kIo, path + ": cannot stat");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t header_size = 8 + 4 + 4 + 8 + 8 + 8;
  if (size < header_size) {
    close(fd);
    return Status(ErrorCode::kStoreFile,
                  path + ":0: not a cfgmask store (file of " + std::to_string(size) + " bytes)");
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return Status(ErrorCode::kIo, path + ": mmap failed");
  const char* p = static_cast<const char*>(map);
  Status result = Status::Ok();
  do {
    if (std::memcmp(p, kMagic, 8) != 0) {
      result = Status(ErrorCode::kStoreFile, path + ":0: not a cfgmask store (bad magic)");
      break;
    }
    Reader h(p + 8, header_size - 8);
    uint32_t format = 0, version = 0;
    uint64_t identity = 0, payload = 0, checksum = 0;
    h.Pod(&format);
    h.Pod(&version);
    h.Pod(&identity);
    h.Pod(&payload);
    h.Pod(&checksum);
    if (format != kStoreFormatVersion || version != kCfgmaskVersion) {
      result = Status(ErrorCode::kStoreFile,
                      path + ":8: store format " + std::to_string(format) + " from cfgmask " +
                          std::to_string(version) + "; this cfgmask reads format " +
                          std::to_string(kStoreFormatVersion) + " from cfgmask " +
                          std::to_string(kCfgmaskVersion) + ": recompile the grammar");
      break;
    }
    if (payload != size - header_size) {
      result = Status(ErrorCode::kStoreFile,
                      path + ":" + std::to_string(size) + ": truncated or padded store (" +
                          std::to_string(size - header_size) + " payload bytes, header says " +
                          std::to_string(payload) + ")");
      break;
    }
    if (Fnv1a(p + header_size, payload) != checksum) {
      result = Status(ErrorCode::kStoreFile, path + ":" + std::to_string(header_size) +
                                                 ": checksum mismatch (corrupted store)");
      break;
    }
    Reader r(p + header_size, payload);
    CompiledStore s;
    if (!Fields(r, &s) || !r.done()) {
      result = Status(ErrorCode::kStoreFile, path + ":" + std::to_string(header_size + r.offset()) +
                                                 ": malformed store payload");
      break;
    }
    std::string why;
    if (!Validate(s, &why) || s.tokenizer_identity != identity) {
      result = Status(ErrorCode::kStoreFile,
                      path + ": inconsistent store (" + (why.empty() ? "identity" : why) + ")");
      break;
    }
    *out = std::move(s);
  } while (false);
  munmap(map, size);
  return result;
}

}  // namespace cfgmask
