// Tests of maskstore/store_file.cc and runtime/compile/store_writer.cc: round trip, atomic replacement (a compile
// killed with SIGKILL at any instant leaves the previous store loadable and no
// partial file), refusal of stores from another version with both version
// numbers in the message, and rejection of truncated, corrupted and forged
// files (regressions found by tests/fuzz/store_file_fuzz.cc included).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <utility>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "maskstore/compiled_store.h"
#include "maskstore/row_codec.h"
#include "maskstore/store_format.h"
#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"
#include "runtime/session.h"
#include "tests/small_tokenizer.h"

extern char** environ;

namespace cfgmask {
namespace {

// The header: magic, format, version, identity, payload size, checksum,
// index-part size, index checksum.
constexpr size_t kHeaderSize = 56, kIndexBytesOffset = 40;

const char kJsonGrammar[] = R"(?start: value
?value: object | array | STRING | NUMBER | "true" | "false" | "null"
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: STRING ":" value
STRING: /"([^"\\]|\\.)*"/
NUMBER: /-?\d+(\.\d+)?([eE][+-]?\d+)?/
WS: /[ \t\n]+/
%ignore WS
)";

std::string MakeTempDir() {
  std::string pattern = (access("/dev/shm", W_OK) == 0 ? std::string("/dev/shm/") : testing::TempDir()) +
                        "cfgmask_store_file_XXXXXX";
  char* made = mkdtemp(pattern.data());
  return made ? std::string(made) + "/" : testing::TempDir();
}

struct TempDir {
  std::string path = MakeTempDir();
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Grammar and tokenizer files in `dir`; `variant` changes the grammar so
// that two stores differ.
void WriteInputs(const std::string& dir, int variant) {
  std::string g = kJsonGrammar;
  if (variant) g += "EXTRA: \"~\"\n%ignore EXTRA\n";  // one terminal more
  WriteTextFile(dir + "g.lark", g);
  WriteTextFile(dir + "tok.json", SmallTokenizerJson());
}

Status Compile(const std::string& dir, CompiledStore* s) {
  return CompileStore(dir + "g.lark", dir + "tok.json", CompileOptions(), s);
}

// The child of KilledCompileLeavesOldStore: the test binary re-executed with
// CFGMASK_STORE_FILE_TEST_CHILD set compiles and writes the store again and
// again until it is killed (from a global environment's SetUp, which runs
// after static initialisation and before any test).
class StoreWriterChild : public testing::Environment {
 public:
  void SetUp() override {
    const char* dir = std::getenv("CFGMASK_STORE_FILE_TEST_CHILD");
    if (dir == nullptr) return;
    WriteTextFile(std::string(dir) + "child_ready", "");
    for (;;) {
      CompiledStore s;
      if (!Compile(dir, &s).ok() || !WriteStoreFile(s, std::string(dir) + "out/store.cfgm").ok()) {
        _exit(3);
      }
    }
  }
};
const testing::Environment* const kStoreWriterChild =
    testing::AddGlobalTestEnvironment(new StoreWriterChild);

TEST(StoreFile, RoundTripLeavesOnlyTheStore) {
  TempDir dir;
  WriteInputs(dir.path, 0);
  CompiledStore s;
  ASSERT_TRUE(Compile(dir.path, &s).ok());
  const std::string path = dir.path + "s.cfgm";
  ASSERT_TRUE(WriteStoreFile(s, path).ok());
  CompiledStore r;
  Status st = ReadStoreFile(path, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r.vocab_size, s.vocab_size);
  EXPECT_EQ(r.action, s.action);
  EXPECT_EQ(r.row_tokens, s.row_tokens);
  EXPECT_EQ(r.tokenizer_identity, s.tokenizer_identity);
  EXPECT_EQ(r.MemoryBytes(), s.MemoryBytes());
  // Overwriting keeps one file: no temporary left behind.
  ASSERT_TRUE(WriteStoreFile(s, path).ok());
  EXPECT_EQ(dir.Files(), (std::vector<std::string>{"g.lark", "s.cfgm", "tok.json"}));
}

TEST(StoreFile, FailedWriteKeepsTheOldFile) {
  TempDir dir;
  WriteInputs(dir.path, 0);
  CompiledStore s;
  ASSERT_TRUE(Compile(dir.path, &s).ok());
  Status st = WriteStoreFile(s, dir.path + "missing/s.cfgm");
  EXPECT_EQ(st.code(), ErrorCode::kIo);
  EXPECT_NE(st.message().find("missing/s.cfgm"), std::string::npos) << st.message();
  // A directory in the way: rename fails, the temporary is removed.
  std::filesystem::create_directory(dir.path + "d.cfgm");
  std::filesystem::create_directory(dir.path + "d.cfgm/x");
  st = WriteStoreFile(s, dir.path + "d.cfgm");
  EXPECT_EQ(st.code(), ErrorCode::kIo);
  EXPECT_EQ(dir.Files(), (std::vector<std::string>{"d.cfgm", "g.lark", "tok.json"}));
}

TEST(StoreFile, KilledCompileLeavesOldStore) {
  TempDir dir;
  std::filesystem::create_directory(dir.path + "out");
  const std::string path = dir.path + "out/store.cfgm";
  WriteInputs(dir.path, 1);
  CompiledStore old_store;
  ASSERT_TRUE(Compile(dir.path, &old_store).ok());
  ASSERT_TRUE(WriteStoreFile(old_store, path).ok());
  const std::string old_bytes = ReadBytes(path);
  WriteInputs(dir.path, 0);  // the child compiles another grammar
  CompiledStore new_store;
  ASSERT_TRUE(Compile(dir.path, &new_store).ok());
  const size_t old_terminals = old_store.terminal_names.size();
  ASSERT_NE(old_terminals, new_store.terminal_names.size());

  const std::string env = "CFGMASK_STORE_FILE_TEST_CHILD=" + dir.path;
  int replaced = 0, strays = 0;
  for (int round = 0; round < 12; ++round) {
    // Put the old store back, start the child, and once it is running kill
    // it after 0..~100 ms: at any point of its compile-and-write loop.
    std::remove((dir.path + "child_ready").c_str());
    WriteTextFile(path + ".old", old_bytes);
    ASSERT_EQ(std::rename((path + ".old").c_str(), path.c_str()), 0);
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) envp.push_back(*e);
    envp.push_back(const_cast<char*>(env.c_str()));
    envp.push_back(nullptr);
    char self[] = "/proc/self/exe";
    char* argv[] = {self, nullptr};
    pid_t pid = 0;
    posix_spawn_file_actions_t quiet;  // the child's gtest banner is noise
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    const int spawned = posix_spawn(&pid, self, &quiet, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&quiet);
    ASSERT_EQ(spawned, 0);
    for (int wait = 0; wait < 3000 && access((dir.path + "child_ready").c_str(), F_OK) != 0; ++wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(9 * round));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
    // Whatever instant the kill hit: no partial file, and the store is the
    // old one or a complete new one.  A kill between linking the complete
    // temporary file and renaming it leaves that file under its temporary
    // name: it must be complete (it loads), and the next write removes it.
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir.path + "out")) {
      const std::string name = e.path().filename().string();
      if (name.rfind("store.cfgm.tmp.", 0) == 0) {
        CompiledStore stray;
        EXPECT_TRUE(ReadStoreFile(e.path().string(), &stray).ok()) << "partial " << name;
        ++strays;
        continue;
      }
      files.push_back(name);
    }
    EXPECT_EQ(files, std::vector<std::string>{"store.cfgm"}) << "round " << round;
    CompiledStore loaded;
    Status st = ReadStoreFile(path, &loaded);
    ASSERT_TRUE(st.ok()) << "round " << round << ": " << st.ToString();
    if (loaded.terminal_names.size() != old_terminals) {
      ++replaced;
      EXPECT_EQ(loaded.MemoryBytes(), new_store.MemoryBytes());
    } else {
      EXPECT_EQ(ReadBytes(path), old_bytes);
    }
  }
  std::printf("new store in place after %d of 12 kills; %d complete temporaries left\n",
              replaced, strays);
  // The next write removes the temporaries of writers that no longer run.
  ASSERT_TRUE(WriteStoreFile(old_store, path).ok());
  std::vector<std::string> after;
  for (const auto& e : std::filesystem::directory_iterator(dir.path + "out")) {
    after.push_back(e.path().filename().string());
  }
  EXPECT_EQ(after, std::vector<std::string>{"store.cfgm"});
}

// Byte offsets of the header fields.
constexpr size_t kFormatOffset = 8, kVersionOffset = 12;

std::string ValidStoreBytes(const TempDir& dir) {
  WriteInputs(dir.path, 0);
  CompiledStore s;
  EXPECT_TRUE(Compile(dir.path, &s).ok());
  EXPECT_TRUE(WriteStoreFile(s, dir.path + "v.cfgm").ok());
  return ReadBytes(dir.path + "v.cfgm");
}

Status ReadFromBytes(const TempDir& dir, const std::string& bytes, bool verify = false,
                     CompiledStore* out = nullptr) {
  const std::string path = dir.path + "x.cfgm";
  WriteTextFile(path, bytes);
  CompiledStore s;
  Status st = ReadStoreFile(path, &s, {.verify = verify});
  if (out != nullptr) *out = s;
  return st;
}


TEST(StoreFile, OtherVersionRefusedWithBothVersions) {
  TempDir dir;
  const std::string good = ValidStoreBytes(dir);
  uint32_t format = 0, version = 0;
  std::memcpy(&format, good.data() + kFormatOffset, 4);
  std::memcpy(&version, good.data() + kVersionOffset, 4);
  EXPECT_EQ(format, kStoreFormatVersion);

  std::string other = good;
  const uint32_t old_format = 77;
  std::memcpy(other.data() + kFormatOffset, &old_format, 4);
  Status st = ReadFromBytes(dir, other);
  EXPECT_EQ(st.code(), ErrorCode::kStoreFile);
  EXPECT_NE(st.message().find("format 77"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("format " + std::to_string(kStoreFormatVersion)), std::string::npos)
      << st.message();

  other = good;
  const uint32_t old_version = version + 41;
  std::memcpy(other.data() + kVersionOffset, &old_version, 4);
  st = ReadFromBytes(dir, other);
  EXPECT_EQ(st.code(), ErrorCode::kStoreFile);
  EXPECT_NE(st.message().find("cfgmask " + std::to_string(old_version)), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("cfgmask " + std::to_string(version)), std::string::npos)
      << st.message();
}

// A store of the format before rows by reference (7) is refused with one
// line naming both formats and what to do.
TEST(StoreFile, PreviousFormatRefusedInOneLine) {
  TempDir dir;
  std::string old = ValidStoreBytes(dir);
  const uint32_t previous = kStoreFormatVersion - 1;
  std::memcpy(old.data() + kFormatOffset, &previous, 4);
  Status st = ReadFromBytes(dir, old);
  EXPECT_EQ(st.code(), ErrorCode::kStoreFile);
  EXPECT_NE(st.message().find("store format " + std::to_string(previous)), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("reads format " + std::to_string(kStoreFormatVersion)),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("recompile the grammar"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
}

// The writer's streamed checksum equals StoreChecksum over the same bytes,
// however they are cut into pieces.
TEST(StoreFile, StreamChecksumEqualsStoreChecksum) {
  std::string bytes(5000, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : bytes) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{1000},
                   bytes.size()}) {
    for (size_t cut : {size_t{1}, size_t{3}, size_t{7}, size_t{32}, size_t{45}, size_t{4096}}) {
      StreamChecksum sum;
      uint64_t prefix_sum = 0;
      const size_t prefix = n / 2;
      size_t done = 0;
      while (done < n) {
        size_t take = std::min(cut, n - done);
        if (done < prefix && done + take > prefix) take = prefix - done;
        sum.Add(bytes.data() + done, take);
        done += take;
        if (done == prefix) prefix_sum = sum.Value();
      }
      EXPECT_EQ(sum.Value(), StoreChecksum(bytes.data(), n)) << n << " bytes in pieces of " << cut;
      if (prefix > 0) EXPECT_EQ(prefix_sum, StoreChecksum(bytes.data(), prefix)) << n << "/" << cut;
    }
  }
}

// Rows by reference: rows appended through RowPayloads decode to the same
// tokens as rows appended one payload each (AppendRow), equal payloads are
// stored once, and the store written and read back gives the same rows.
TEST(StoreFile, RowsByReferenceStoreEachPayloadOnce) {
  TempDir dir;
  WriteInputs(dir.path, 0);
  CompiledStore base;
  ASSERT_TRUE(Compile(dir.path, &base).ok());
  base.vocab_size = 3000;
  base.token_special.assign(3000, 0);
  base.token_special[7] = 1;
  const int32_t text = TextTokenCount(base);
  CompiledStore plain = base, shared = base;
  for (CompiledStore* s : {&plain, &shared}) {
    s->row_seq.clear(), s->row_kind.clear(), s->row_offset.clear(), s->row_length.clear();
    s->row_tokens.clear(), s->row_bits.clear();
  }
  RowPayloads payloads(&shared);
  uint64_t x = 0x2545f4914f6cdd1dull;
  auto next = [&] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
  std::vector<std::vector<int32_t>> kinds_of_rows;
  for (int i = 0; i < 400; ++i) {
    std::vector<int32_t> toks;
    const int shape = static_cast<int>(next() % 4);  // a few tokens, many, almost all, repeated
    if (shape == 3 && !kinds_of_rows.empty()) {
      toks = kinds_of_rows[next() % kinds_of_rows.size()];
    } else {
      const uint64_t keep = shape == 0 ? 200 : shape == 1 ? 500000 : 999000;  // per million
      for (int32_t t = 0; t < 3000; ++t)
        if (t != 7 && next() % 1000000 < keep) toks.push_back(t);
      kinds_of_rows.push_back(toks);
    }
    AppendRow(i % 5, toks, text, &plain);
    payloads.Append(i % 5, toks, text);
  }
  ASSERT_EQ(plain.row_seq.size(), shared.row_seq.size());
  EXPECT_EQ(plain.row_seq, shared.row_seq);
  EXPECT_EQ(plain.row_kind, shared.row_kind);
  EXPECT_LT(shared.row_tokens.size() + shared.row_bits.size(),
            plain.row_tokens.size() + plain.row_bits.size());
  EXPECT_EQ(payloads.distinct(), DistinctRowPayloads(plain));
  EXPECT_EQ(payloads.distinct(), DistinctRowPayloads(shared));
  for (int32_t r = 0; r < static_cast<int32_t>(plain.row_seq.size()); ++r) {
    std::vector<int32_t> a, b;
    DecodeRow(plain, r, &a);
    DecodeRow(shared, r, &b);
    ASSERT_EQ(a, b) << "row " << r;
  }
  // Copy keeps the sharing; a second interner over a built store adds nothing new.
  CompiledStore copy = base;
  copy.row_seq.clear(), copy.row_kind.clear(), copy.row_offset.clear(), copy.row_length.clear();
  copy.row_tokens.clear(), copy.row_bits.clear();
  RowPayloads copier(&copy);
  for (int32_t r = 0; r < static_cast<int32_t>(plain.row_seq.size()); ++r) copier.Copy(plain, r, 1);
  EXPECT_EQ(copy.row_tokens, shared.row_tokens);
  EXPECT_EQ(copy.row_bits, shared.row_bits);
  EXPECT_EQ(copy.row_offset, shared.row_offset);
  const size_t before = shared.row_tokens.size() + shared.row_bits.size();
  RowPayloads again(&shared);
  again.Copy(plain, 0, 0);
  EXPECT_EQ(shared.row_tokens.size() + shared.row_bits.size(), before);
  EXPECT_EQ(again.distinct(), payloads.distinct());
}

TEST(StoreFile, TruncatedAndCorruptedFilesRejected) {
  TempDir dir;
  const std::string good = ValidStoreBytes(dir);
  ASSERT_TRUE(ReadFromBytes(dir, good).ok());
  const size_t step = std::max<size_t>(1, good.size() / 300);
  for (size_t n = 0; n < good.size(); n += step) {
    Status st = ReadFromBytes(dir, good.substr(0, n));
    ASSERT_FALSE(st.ok()) << "truncated at " << n;
    EXPECT_EQ(st.code(), ErrorCode::kStoreFile) << st.ToString();
  }
  // A flipped byte: always refused with the full checksum (verify); without
  // it, refused anywhere in the header and the index part, and in the row
  // payload either refused (a token id out of range) or read as a store the
  // runtime can use safely (a different but valid token id).
  uint64_t index_bytes = 0;
  std::memcpy(&index_bytes, good.data() + kIndexBytesOffset, 8);
  ASSERT_GT(index_bytes, 0u);
  ASSERT_LT(kHeaderSize + index_bytes, good.size());
  int accepted_in_rows = 0, caught_in_rows = 0, unchanged = 0;
  for (size_t at = 0; at < good.size(); at += step) {
    std::string bad = good;
    bad[at] ^= 0x5a;
    Status st = ReadFromBytes(dir, bad, /*verify=*/true);
    ASSERT_FALSE(st.ok()) << "byte " << at << " flipped";
    EXPECT_EQ(st.code(), ErrorCode::kStoreFile) << st.ToString();
    CompiledStore s;
    st = ReadFromBytes(dir, bad, /*verify=*/false, &s);
    const bool full_checksum_field = at >= 24 && at < 32;
    if (at < kHeaderSize + index_bytes && !full_checksum_field) {
      ASSERT_FALSE(st.ok()) << "byte " << at << " flipped";
      EXPECT_EQ(st.code(), ErrorCode::kStoreFile) << st.ToString();
    } else if (st.ok()) {
      ++accepted_in_rows;
      // The per-root row checksums: a flipped byte in a root's rows is an
      // error before that root's first mask, never a different mask
      // (RowFlipsAreCaughtBeforeAMask); outside every root's rows
      // (alignment padding) nothing changes.
      CompiledStore ref;
      ASSERT_TRUE(ReadFromBytes(dir, good, /*verify=*/false, &ref).ok());
      Session session(&s), reference(&ref);
      std::vector<uint32_t> mask(s.mask_words()), expect(s.mask_words());
      for (int k = 0; k < 4; ++k) {
        session.FillMask(mask.data());
        reference.FillMask(expect.data());
        if (!session.store_status().ok()) break;  // caught: the mask is not served
        ASSERT_EQ(mask, expect) << "byte " << at << " flipped: a different mask, no error";
        int32_t t = 0;
        while (t < s.vocab_size && !(mask[t >> 5] >> (t & 31) & 1)) ++t;
        if (t == s.vocab_size || !session.Advance(t).ok()) break;
        ASSERT_TRUE(reference.Advance(t).ok());
      }
      if (s.AllRowsOk()) ++unchanged;
      else ++caught_in_rows;
    }
  }
  EXPECT_GT(accepted_in_rows, 0) << "no flip in the row payload was tried";
  EXPECT_GT(caught_in_rows, unchanged) << "the row checksums caught few flips";
}

// Found by store_file_fuzz: empty arrays were read with memcpy from a null
// vector (undefined behaviour that the sanitizer build reports).
TEST(StoreFile, EmptyArraysRoundTrip) {
  TempDir dir;
  WriteInputs(dir.path, 0);
  CompiledStore s;
  ASSERT_TRUE(Compile(dir.path, &s).ok());
  s.eos_ids.clear();
  s.unless_data.clear();
  s.unless_offsets.assign(s.num_terminals + 1, 0);
  s.row_bits.clear();
  for (size_t r = 0; r < s.row_kind.size(); ++r) {
    if (s.row_kind[r] == static_cast<int32_t>(RowKind::kBitset)) s.row_offset[r] = s.row_length[r] = 0;
  }
  ASSERT_TRUE(WriteStoreFile(s, dir.path + "e.cfgm").ok());
  CompiledStore r;
  Status st = ReadStoreFile(dir.path + "e.cfgm", &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(r.eos_ids.empty());
  EXPECT_TRUE(r.row_bits.empty());
}

// Stores whose checksum is right but whose tables point out of range (as a
// forger, or a buggy writer, would make them) are refused before a session
// can follow an index.  WriteStoreFile computes a valid checksum for any
// CompiledStore, so each case edits one field of a real store.
TEST(StoreFile, ForgedTablesRejected) {
  TempDir dir;
  WriteInputs(dir.path, 0);
  CompiledStore good;
  ASSERT_TRUE(Compile(dir.path, &good).ok());
  ASSERT_FALSE(good.step_to.empty());
  ASSERT_FALSE(good.cand_item.empty());
  ASSERT_FALSE(good.row_kind.empty());
  int32_t reduce_rule = -1;  // a rule with a non-empty right side
  for (size_t r = 0; r < good.rule_length.size(); ++r) {
    if (good.rule_length[r] > 0) reduce_rule = static_cast<int32_t>(r);
  }
  ASSERT_GE(reduce_rule, 0);
  int32_t emit_item = -1;
  for (size_t i = 0; i < good.item_kind.size(); ++i) {
    if (good.item_kind[i] == 0) emit_item = static_cast<int32_t>(i);
  }
  ASSERT_GE(emit_item, 0);
  const std::vector<std::pair<const char*, std::function<void(CompiledStore*)>>> edits = {
      {"lexer transition", [](CompiledStore* s) { s->step_to[0] = s->num_lex_states; }},
      {"candidate item", [](CompiledStore* s) { s->cand_item[0] = -1; }},
      {"token offsets", [](CompiledStore* s) { std::swap(s->token_offsets[1], s->token_offsets[2]); }},
      {"item terminal", [](CompiledStore* s) { s->item_terminal[0] = s->num_terminals; }},
      {"goto", [](CompiledStore* s) { s->goto_table[0] = s->num_states; }},
      {"indenter", [](CompiledStore* s) { s->indenter_nl = s->num_terminals + 3; }},
      {"initial state", [](CompiledStore* s) { s->initial_lex_state = s->num_lex_states; }},
      {"tail item", [emit_item](CompiledStore* s) {
         for (int32_t& t : s->tail_item) t = emit_item;
       }},
      {"reduction deeper than the stack", [reduce_rule](CompiledStore* s) {
         for (int32_t t = 0; t < s->num_parse_terminals; ++t) {
           s->action[static_cast<size_t>(s->start_state) * s->num_parse_terminals + t] =
               -(reduce_rule + 1);
         }
       }},
  };
  for (const auto& [what, edit] : edits) {
    CompiledStore s = good;
    edit(&s);
    const std::string path = dir.path + "forged.cfgm";
    ASSERT_TRUE(WriteStoreFile(s, path).ok()) << what;
    CompiledStore r;
    Status st = ReadStoreFile(path, &r);
    EXPECT_EQ(st.code(), ErrorCode::kStoreFile) << what << ": " << st.ToString();
    EXPECT_NE(st.message().find("inconsistent store"), std::string::npos) << what << ": " << st.message();
  }
  // Rows are checked per root on first use: a forged row loads, and the
  // first mask that meets it leaves it out and makes the session fail; with
  // verify the loader refuses it at once.
  const std::vector<std::pair<const char*, std::function<void(CompiledStore*, int32_t)>>> row_edits = {
      {"row kind", [](CompiledStore* s, int32_t r) { s->row_kind[r] = 7; }},
      {"row offset", [](CompiledStore* s, int32_t r) { s->row_offset[r] = -5; }},
      {"row sequence", [](CompiledStore* s, int32_t r) { s->row_seq[r] = 1 << 30; }},
      {"row token", [](CompiledStore* s, int32_t r) {
         for (int32_t k = r; k < static_cast<int32_t>(s->row_kind.size()); ++k) {
           if (s->row_kind[k] != static_cast<int32_t>(RowKind::kBitset) && s->row_length[k] > 0) {
             s->row_tokens[s->row_offset[k]] = s->vocab_size;
             return;
           }
         }
         s->row_kind[r] = -1;
       }},
  };
  const int32_t first_root = good.root_index[good.initial_lex_state];
  ASSERT_GE(first_root, 0);
  const int32_t first_row = good.root_row_offsets[first_root];
  ASSERT_LT(first_row, good.root_row_offsets[first_root + 1]);
  for (const auto& [what, edit] : row_edits) {
    CompiledStore s = good;
    edit(&s, first_row);
    const std::string path = dir.path + "forged.cfgm";
    ASSERT_TRUE(WriteStoreFile(s, path).ok()) << what;
    CompiledStore r;
    Status st = ReadStoreFile(path, &r, {.verify = true});
    EXPECT_EQ(st.code(), ErrorCode::kStoreFile) << what << ": " << st.ToString();
    ASSERT_TRUE(ReadStoreFile(path, &r).ok()) << what;
    Session session(&r);
    bool damaged = false;
    for (int k = 0; k < 20 && !damaged; ++k) {
      std::vector<uint32_t> mask = session.Mask();
      damaged = !session.store_status().ok();
      int32_t t = 0;
      while (t < r.vocab_size && !(mask[t >> 5] >> (t & 31) & 1)) ++t;
      if (damaged || t == r.vocab_size) break;
      if (!session.Advance(t).ok()) break;
    }
    if (r.row_kind[first_row] == 7 || r.row_offset[first_row] < 0 || r.row_seq[first_row] == 1 << 30) {
      EXPECT_TRUE(damaged) << what;  // the initial state's root is met at once
      EXPECT_EQ(session.Advance(0).code(), ErrorCode::kStoreFile) << what;
    }
  }
  // The unedited store loads and runs.
  ASSERT_TRUE(WriteStoreFile(good, dir.path + "good.cfgm").ok());
  CompiledStore r;
  ASSERT_TRUE(ReadStoreFile(dir.path + "good.cfgm", &r).ok());
  Session session(&r);
  EXPECT_FALSE(session.Mask().empty());
}

// Found by store_file_fuzz (2026-11-23): a store whose Emit and Hit items
// name slots that are not open passes the loader's checks (each slot is in
// range on its own); the session aborted on an internal check (or, without
// checks, read past its slot table).  Such items are now refused as
// hypotheses: the session runs, its masks are those of the forged tables.
TEST(StoreFile, ForgedSlotsDoNotCrashTheSession) {
  TempDir dir;
  WriteInputs(dir.path, 0);
  CompiledStore good;
  ASSERT_TRUE(Compile(dir.path, &good).ok());
  for (int shift : {1, 7, 0xFFFF}) {
    CompiledStore s = good;
    int forged = 0;
    for (size_t i = 0; i < s.item_kind.size(); ++i) {
      if (s.item_kind[i] == 0 || s.item_kind[i] == 1) {
        s.item_slot[i] = std::min(0xFFFF, s.item_slot[i] + shift);
        ++forged;
      }
    }
    ASSERT_GT(forged, 0);
    const std::string path = dir.path + "slots.cfgm";
    ASSERT_TRUE(WriteStoreFile(s, path).ok());
    CompiledStore r;
    Status st = ReadStoreFile(path, &r);
    if (!st.ok()) continue;  // refused by the loader: fine too
    Session session(&r);
    for (const char* text : {"{\"a\": [1, true, null]}", "[1, 2", "\"x\""}) {
      session.Reset();
      (void)session.Mask();
      (void)session.AdvanceBytes(text);
      (void)session.Mask();
      for (int32_t t = 0; t < r.vocab_size; ++t) (void)session.AllowsSlow(t);
    }
  }
}

// A store read from a file is a set of views into the mapping (zero-copy),
// and stays so while sessions decode with it: nothing in the runtime writes
// to (and so copies) an array.  The mapping outlives the path: the file is
// replaced while the store is open, as a recompile does.
TEST(StoreFile, ReadStoreIsZeroCopyAndSurvivesReplacement) {
  TempDir dir;
  WriteInputs(dir.path, 0);
  CompiledStore built;
  ASSERT_TRUE(Compile(dir.path, &built).ok());
  const std::string path = dir.path + "z.cfgm";
  ASSERT_TRUE(WriteStoreFile(built, path).ok());
  CompiledStore s;
  ASSERT_TRUE(ReadStoreFile(path, &s).ok());
  ASSERT_NE(s.mapping, nullptr);
  EXPECT_TRUE(s.row_kind.is_view());
  EXPECT_TRUE(s.action.is_view());
  EXPECT_TRUE(s.token_bytes.is_view());
  const size_t owned_before = s.OwnedBytes();
  EXPECT_LT(owned_before, 4096u) << "arrays copied on open";
  ASSERT_TRUE(WriteStoreFile(built, path).ok());  // replaced under the mapping
  const CompiledStore& cs = s;
  Session session(&cs);
  std::vector<uint32_t> mask(cs.mask_words()), expect(cs.mask_words());
  Session reference(&built);
  for (int k = 0; k < 30; ++k) {
    session.FillMask(mask.data());
    reference.FillMask(expect.data());
    ASSERT_EQ(mask, expect) << "step " << k;
    int32_t t = 0;
    while (t < cs.vocab_size && !(mask[t >> 5] >> (t & 31) & 1)) ++t;
    if (t == cs.vocab_size) break;
    ASSERT_TRUE(session.Advance(t).ok());
    ASSERT_TRUE(reference.Advance(t).ok());
  }
  EXPECT_EQ(s.OwnedBytes(), owned_before);
  EXPECT_TRUE(s.row_kind.is_view());
  CompiledStore copy = s;  // a copy shares the mapping
  s = CompiledStore();
  EXPECT_TRUE(copy.row_kind.is_view());
  EXPECT_EQ(copy.TokenBytes(1), built.TokenBytes(1));
}

}  // namespace
}  // namespace cfgmask
