// The compiled store: everything the runtime needs, in flat int32/uint64
// arrays so that it is written and read as one versioned, checksummed file
// (format: store_format.h; read by store_file.cc, written by the compile
// driver's runtime/compile/store_writer.cc) and shared read-only by any
// number of sessions.
//
//  - vocabulary: token bytes, special flags, EOS ids, identity hash;
//  - LALR(1) tables and, per parser state, the contextual lexer's scanner as
//    two terminal bitsets (all terminals it scans; the alternation after
//    Lark's "embedded" keyword strings are removed);
//  - the frozen terminal automaton: per lexer state its byte transitions,
//    boundary candidates with their results, slot compaction and end-of-input
//    alternatives (lexer/terminal_automaton.h explains the items);
//  - the mask store proper (streamlining seed): for every lexer state q at a
//    token boundary, rows (q, S) -> set of tokens, S an interned item
//    sequence; token sets stored adaptively (sorted ids, complement, bitset).
// Tested by streamline_store_test.cc and store_file_test.cc.
#ifndef CFGMASK_MASKSTORE_COMPILED_STORE_H_
#define CFGMASK_MASKSTORE_COMPILED_STORE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/base/status.h"
#include "maskstore/store_array.h"
#include "parser/lr_core.h"
#include "parser/stack_viability.h"

namespace cfgmask {

// 6: per-root row checksums (CompiledStore::root_row_checksum).
// 8: rows by reference: rows with equal payloads share one (row_offset),
// so a store of format 7 and one of format 8 differ in bytes.
constexpr uint32_t kStoreFormatVersion = 8;

// The kind of a store item (CompiledStore::item_kind), numbered as
// lexer/terminal_automaton.h's LexItem::Kind; what each means to the parser
// is maskstore/hypothesis_parser.h.
enum class ItemKind : int32_t {
  kEmit = 0,  // a terminal ended (item_terminal; blockers, full match, column)
  kHit = 1,   // a blocking shadow matched: legal only if its slot's scanner lacks item_terminal
  kTail = 2,  // the token ends inside a terminal (item_blockers: those still able to end;
              // item_slot: -1, or terminals of which the scanner may hold none)
};

enum class RowKind : int32_t {
  kList = 0,        // sorted token ids
  kComplement = 1,  // every non-special token except the sorted ids
  kBitset = 2,      // ceil(V/32) uint32 words
};

struct CompiledStore {
  // Identity.
  std::string grammar_name;
  std::string start;
  std::string tokenizer_name;
  uint64_t tokenizer_identity = 0;

  // Vocabulary.
  int32_t vocab_size = 0;
  StoreArray<int32_t> token_offsets;  // vocab_size + 1
  StoreArray<char> token_bytes;
  StoreArray<uint8_t> token_special;
  StoreArray<int32_t> eos_ids;

  // Terminals.
  int32_t num_terminals = 0;           // grammar terminals ($END excluded)
  std::vector<std::string> terminal_names;
  StoreArray<int32_t> terminal_rank;  // Lark lexer order, -1 for declared
  StoreArray<uint8_t> terminal_ignored;
  StoreArray<uint8_t> terminal_open_paren, terminal_close_paren;
  StoreArray<uint8_t> terminal_is_string;
  StoreArray<int32_t> unless_offsets, unless_data;  // per regexp terminal: strings it retypes
  // What may follow a %ignore'd terminal's match (lexer/terminal_successors.h):
  // next_any[t] = 1, anything; else next_data[next_offsets[t]..] lists the
  // terminals, none ignored, that can be the next one fed to the parser.
  StoreArray<uint8_t> terminal_next_any;
  StoreArray<int32_t> terminal_next_offsets, terminal_next_data;
  StoreArray<int32_t> terminal_min_bytes;  // fewest bytes the lexer ends as each terminal
  int32_t indenter_nl = -1, indenter_indent = -1, indenter_dedent = -1;
  int32_t indenter_tab_len = 8;

  // Parser.
  int32_t num_states = 0;
  int32_t num_parse_terminals = 0;     // + $END
  int32_t num_nonterminals = 0;
  int32_t start_state = 0;
  StoreArray<int32_t> action, goto_table, rule_lhs, rule_length;
  int32_t scanner_words = 0;           // ceil(num_terminals / 64)
  StoreArray<uint64_t> scanner_terms, scanner_alt;  // num_states * scanner_words

  // Items and sets.
  StoreArray<int32_t> item_kind, item_terminal, item_blockers, item_full, item_col_abs,
      item_col, item_slot;
  StoreArray<int32_t> set_offsets, set_data;
  StoreArray<int32_t> seq_offsets, seq_data;  // sequences of item ids
  ItemKind KindOf(int32_t item) const { return static_cast<ItemKind>(item_kind[item]); }

  // Frozen lexer states.
  int32_t num_lex_states = 0;
  int32_t initial_lex_state = 0;
  StoreArray<int32_t> step_offsets;            // per state, into step_*
  StoreArray<int32_t> step_byte, step_to, step_hits;  // hits: seq id (0 = none)
  StoreArray<int32_t> cand_offsets;            // per state, into cand_*
  StoreArray<int32_t> cand_terminal, cand_to, cand_item;
  StoreArray<int32_t> compact_to, compact_map; // per state; map: set id (slot map)
  StoreArray<int32_t> num_slots;               // per state
  StoreArray<int32_t> at_start;                // per state
  StoreArray<int32_t> eof_offsets, eof_seq;    // per state (roots only non-empty)
  StoreArray<int32_t> root_index;              // per state: row group or -1
  StoreArray<int32_t> tail_item;               // per state: kTail item id, -1 at a start

  // The mask store.  A row (row id r) is a reference: its item sequence and
  // its payload's kind, offset and length; equal payloads are stored once
  // and shared by every row that holds them (maskstore/row_codec.h,
  // RowPayloads), so a row id reads its tokens as row_tokens / row_bits
  // [row_offset[r], + row_length[r]) whichever row stored them first.
  int32_t num_roots = 0;
  StoreArray<int32_t> root_row_offsets;        // per root, into row_*
  StoreArray<int32_t> row_seq, row_kind, row_offset, row_length;
  StoreArray<int32_t> row_tokens;              // kList / kComplement payload
  StoreArray<uint32_t> row_bits;               // kBitset payload
  // Simulated tokens: a token whose lexing from a root branches into more
  // hypotheses than CompileOptions::max_walk_hypotheses (e.g. a run of "="
  // where "=" and "==" are both terminals: Fibonacci many splits) has no
  // rows under that root; the runtime checks it by simulation instead (the
  // parser prunes the splits as they appear).  Per root, sim_token lists such
  // tokens and sim_row the row holding just that token, one of the rows past
  // root_row_offsets[num_roots] that belong to no root.
  StoreArray<int32_t> root_sim_offsets;        // per root, into sim_* (num_roots + 1)
  StoreArray<int32_t> sim_token, sim_row;
  // Per root, a checksum of its rows (their sequence ids, kinds, payload
  // ranges and payload bytes, its simulated tokens' rows too), in the index
  // part: written by WriteStoreFile, checked with the rows' ranges before a
  // root's first mask (CheckRootRows), so that a flipped bit in the rows
  // part is an error and never a mask.  Empty for a store built in memory.
  StoreArray<uint64_t> root_row_checksum;

  // Statistics (cfgmask stats).
  struct Stats {
    double seconds_grammar = 0, seconds_lalr = 0, seconds_automaton = 0, seconds_store = 0;
    // Reading the tokenizer file and building its vocabulary trie: work that
    // depends on the tokenizer alone (the peers' "tokenizer info"), counted
    // in seconds_automaton too.
    double seconds_tokenizer = 0;
    int64_t nfa_transition_entries = 0;  // (root, token, S) triples
    int64_t rows_before_streamlining = 0;
    int64_t simulated_pairs = 0;         // (root, token) pairs checked by simulation
    // Streamlining (streamline/streamline.h); streamlined = 0 when it did not run.
    int64_t streamlined = 0;
    int64_t rows_deleted = 0, never_queries = 0;  // never-legal rows deleted
    int64_t rows_after_fold = 0;
    int64_t row_bytes_before = 0, row_bytes_after = 0;
    int64_t fold_queries = 0, fold_proved = 0;
    double seconds_streamline = 0;
  } stats;

  std::string_view TokenBytes(int32_t t) const {
    return std::string_view(token_bytes.data() + token_offsets[t],
                            token_offsets[t + 1] - token_offsets[t]);
  }
  int32_t mask_words() const { return (vocab_size + 31) / 32; }
  // The parse tables, for the LR core (parser/lr_core.h).
  LrTables lr() const {
    return {action.data(), goto_table.data(), rule_lhs.data(), rule_length.data(), num_states,
            num_parse_terminals, num_nonterminals, static_cast<int32_t>(rule_lhs.size())};
  }
  // Is terminal t in terminal set `set` (sorted set_data[set_offsets[set]..])?
  bool SetContains(int32_t set, int32_t t) const {
    const int32_t* b = set_data.data() + set_offsets[set];
    const int32_t* e = set_data.data() + set_offsets[set + 1];
    return std::binary_search(b, e, t);
  }
  size_t MemoryBytes() const;
  // Bytes held by the process for this store: owned arrays only (views into
  // a mapped file are shared pages of the page cache).
  size_t OwnedBytes() const;

  // The mapped store file the arrays view (ReadStoreFile); null for a store
  // built in memory.  Shared by copies of the store, unmapped with the last.
  std::shared_ptr<const void> mapping;

  // Are root's rows safe to follow (row sequence ids, kinds, payload ranges
  // and token ids in range, its simulated tokens' rows too) and intact (the
  // root's checksum, root_row_checksum)?  A store read
  // from a file checks each root's rows the first time a session asks
  // (ReadStoreFile leaves them to this, so that opening does not read the
  // whole row payload), then answers from a flag; thread-safe.  A store
  // built in memory is trusted: always true.
  bool RootRowsOk(int32_t root) const {
    if (row_check == nullptr) return true;
    const uint8_t v = row_check->state[root].load(std::memory_order_acquire);
    return v == 1 || (v == 0 && CheckRootRows(root));
  }
  // Checks every root now (false: some root's rows are damaged).
  bool AllRowsOk() const;
  struct RowCheck {
    explicit RowCheck(size_t n) : state(new std::atomic<uint8_t>[n]()) {}
    std::unique_ptr<std::atomic<uint8_t>[]> state;  // 0 unchecked, 1 ok, 2 damaged
  };
  std::shared_ptr<RowCheck> row_check;

  // Which LR stacks can still complete (parser/stack_viability.h), made from
  // the tables when the store is built or read (not written to the file);
  // null when every stack the tables build completes, and then nothing is
  // checked.  Read by HypothesisParser (maskstore/hypothesis_parser.h).
  std::shared_ptr<const StackViability> viability;
  void ComputeViability();

 private:
  bool CheckRootRows(int32_t root) const;
};

// The message of a store whose rows failed their check (CheckRootRows).
std::string DamagedRowsMessage();

struct StoreReadOptions {
  // Also check the whole payload's checksum (the row payload is otherwise
  // checked for range, not for bit flips).  Reads every page of the file.
  bool verify = false;
};
// Maps `path` and points `store`'s arrays into it (zero-copy; store->mapping
// keeps the file mapped).  A damaged or foreign file is an error, never a
// store the runtime could read out of bounds.
Status ReadStoreFile(const std::string& path, CompiledStore* store);
Status ReadStoreFile(const std::string& path, CompiledStore* store, const StoreReadOptions& options);
// The header a writer gives `payload` (its identity, sizes and checksums), so
// that tests and the loader's fuzz target reach the structural checks.
std::string StoreFileHeaderFor(const std::string& payload);

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_COMPILED_STORE_H_
