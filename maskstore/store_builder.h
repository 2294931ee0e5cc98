// Compiles a grammar and a tokenizer into a CompiledStore, as a pipeline of
// phases, each taking what the earlier ones made (store_builder.cc): read
// the grammar (the .lark reader: BNF, terminals) -> LALR(1) tables -> the
// terminal automaton -> the tokenizer -> the vocabulary walk, which fills
// nfa_transition and the mask-store rows (streamlining seed, section 2:
// mask_store[(q, S)] = tokens whose walk from q yields terminal sequence S)
// -> the store (the automaton frozen, items and sequences numbered).  A
// driver runs them in order, times each (CompiledStore::Stats) and reports
// progress (CompileOptions::progress).  Streamlining and writing the file
// come after, in runtime/compile.h and maskstore/store_file.h.
//
// The walk and the store phase are maskstore/vocab_walk.h.  Tested by
// vocab_walk_test.cc (against a brute-force byte-by-byte simulation of every
// token, thread-count determinism and resource limits).
//
// The tokenizer may be prepared once (PrepareTokenizer: its file read, its
// trie built) and shared by any number of compiles.
#ifndef CFGMASK_MASKSTORE_STORE_BUILDER_H_
#define CFGMASK_MASKSTORE_STORE_BUILDER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grammar/status.h"
#include "lexer/terminal_automaton.h"
#include "lexer/tokenizer/tokenizer.h"
#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"

namespace cfgmask {

struct WalkRecord;

// A progress report of the compile (CompileOptions::progress).
struct CompileProgress {
  // The phase starting or under way, in this order: "grammar", "lalr",
  // "automaton", "tokenizer", "walk", "store" (maskstore/), then
  // "streamline" (runtime/compile.h).
  std::string phase;
  double walk_fraction = 0;  // share of the vocabulary walk done, in [0,1]; never decreases
  double seconds = 0;        // since the compile began
};

struct CompileOptions {
  std::string start;              // start rule; empty = "start"
  std::string indenter = "auto";  // "python", "none", or "auto" (declared _INDENT/_DEDENT)
  // Resource limits: exceeding one stops the compile with kResourceLimit and
  // a message naming the limit.
  int32_t max_lexer_states = 2000000;      // terminal-automaton states
  int32_t max_roots = 200000;              // lexer states at token boundaries
  int64_t max_store_entries = 2000000000;  // nfa_transition (root, token, S) entries
  int64_t max_store_rows = 200000000;      // mask-store rows (root, S)
  double max_seconds = 0;                  // wall time of the whole compile; 0 = none
  // Bytes of heap the compile may add (runtime/compile.h enforces it for the
  // whole compile); 0 = three quarters of the machine's physical memory.
  int64_t max_memory = 0;
  // When set, receives one line per likely mistake the compile accepts
  // ("FILE:LINE:COL: warning: ..."): unreachable rules, unused terminals,
  // %declare'd terminals nothing produces.
  std::vector<std::string>* warnings = nullptr;
  // A token whose walk from a root holds more lexing hypotheses than this
  // at some byte is not given rows under that root: the runtime checks it by
  // simulation (CompiledStore::sim_token).  Exact either way; this bounds the
  // walk on tokens with exponentially many splits.
  int32_t max_walk_hypotheses = 128;
  // Bytes the vocabulary walk may keep of finished sub-walks (the subtree
  // below a first byte from one walk state, shared by every root that reaches
  // it) between batches of roots; past it, those the latest batch did not
  // use are dropped, least recently used first.  Speed only: the store is the
  // same for any value (0: none kept across batches).
  int64_t walk_memo_bytes = int64_t{64} << 20;
  // The walk drops a lexing as soon as two adjacent terminals of it can never
  // touch (FOLLOW).  Off, the store holds every lexing of the terminal
  // automaton, as the design's nfa_transition does, and the never-legal
  // streamlining step deletes them instead: same masks, more work; for
  // measuring reductions against the design's (cfgmask compile
  // --no-pair-pruning).
  bool prune_pairs = true;
  // Threads of the vocabulary walk: 0 = all cores, 1 = serial.  The store is
  // byte-identical for every value.
  int32_t num_threads = 0;
  std::vector<std::string> import_paths;
  std::string lark_grammars_dir;  // see LarkReaderOptions
  // When set, receives the BNF grammar the store is built from (for the
  // analyses that run after the build, e.g. interchangeable terminals).
  Grammar* grammar_out = nullptr;
  // Receives a report when each phase begins and, during the vocabulary
  // walk, after each batch of roots, on the thread that called the compile.
  // It may throw: the compile then unwinds and `out` is left empty.
  std::function<void(const CompileProgress&)> progress;
  // Tests only: walk just these token ids (empty: the whole vocabulary).
  std::vector<int32_t> vocab_subset;
  // Tests only: receives the automaton and every nfa_transition entry.
  WalkRecord* record = nullptr;
};

// One nfa_transition entry: the token `token` read from root `root` (index
// into WalkRecord::roots) can end in lexer state `to` (after slot
// compaction, a root itself) having produced `items` (the last one the Tail
// of the state before compaction).
struct NfaTransitionEntry {
  int32_t root;
  int32_t token;
  int32_t to;
  std::vector<LexItem> items;
};

struct WalkRecord {
  bool keep_impossible_pairs = false;  // in: no pruning of Emit pairs by FOLLOW
  std::shared_ptr<TerminalAutomaton> automaton;  // out: as left by the compile
  std::vector<int32_t> roots;                    // out: lexer state of each root
  int32_t indenter_nl = -1;                      // out: -1 without indenter
  std::vector<uint8_t> ignored;                  // out: per terminal
  std::vector<NfaTransitionEntry> entries;       // out: in root order, then walk order
};

// A tokenizer read once and made ready for any number of compiles (the
// peers' "tokenizer info"): its vocabulary, its byte trie and the store's
// token tables.  Read-only once prepared: compiles on several threads may
// share one.
struct PreparedTokenizer {
  Vocabulary vocab;
  VocabTrie trie;
  CompiledStore tokens;  // only the vocabulary fields (FillVocabulary)
  double seconds = 0;    // reading and preparing
};

// Reads a tokenizer file (HF tokenizer.json, GGUF, tiktoken) and prepares it.
Status PrepareTokenizer(const std::string& tokenizer_path, PreparedTokenizer* out);

Status CompileStore(const std::string& grammar_path, const std::string& tokenizer_path,
                    const CompileOptions& options, CompiledStore* out);
// The same with a prepared tokenizer: the store's seconds_tokenizer is 0
// (no tokenizer work in this compile).
Status CompileStore(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                    const CompileOptions& options, CompiledStore* out);

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_STORE_BUILDER_H_
