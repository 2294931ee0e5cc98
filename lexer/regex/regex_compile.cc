// Regex tree (grammar/base/regex_ast.h) -> byte-level Thompson NFA with
// Python's match priorities.
//
// Character leaves arrive resolved (ResolveCharClass, grammar/base/
// char_class.cc: the exact code points sre matches, case folding included).
// Their sets are compiled to UTF-8 byte-range sequences the way RE2's
// compiler and Rust's regex-syntax Utf8Sequences do: split the range where
// the encoded length changes, then where continuation bytes stop spanning
// their full 0x80-0xBF range, so each piece is a product of byte ranges.
// Suffixes are shared through a cache keyed by (byte range, next
// instruction).  Surrogates are never members.
//
// Priorities.  Split's `out` is the branch sre's backtracking tries first, so
// a Pike VM that keeps threads in priority order gives re.match()'s result.
// The one place where sre's behaviour is not a plain regular-expression
// priority is its zero-width-iteration rule (_sre.c MAX_UNTIL / MIN_UNTIL):
// once a repeat has its minimum count, an iteration that consumed nothing
// does not loop again but continues with the tail.  The compiler therefore
// builds every subexpression against two continuations, `ke` (taken when
// the innermost enclosing optional iteration has consumed nothing so far)
// and `kc` (taken once it has consumed a byte); a body that cannot match
// empty collapses both, so only nullable loop bodies are duplicated.
//
// Width: the one width rule, RegexNodeWidth (grammar/base/regex_width.cc).
// Tested by regex_test.cc.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "grammar/base/check.h"
#include "grammar/base/regex_ast.h"
#include "grammar/base/unicode.h"
#include "lexer/regex/regex.h"

namespace cfgmask {
namespace {

// UTF-8 encoding of c into buf; returns the length.
int EncodeUtf8(uint32_t c, uint8_t* buf) {
  if (c < 0x80) {
    buf[0] = static_cast<uint8_t>(c);
    return 1;
  }
  if (c < 0x800) {
    buf[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
    buf[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    buf[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
    buf[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    buf[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 3;
  }
  buf[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
  buf[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
  buf[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
  buf[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  return 4;
}

struct ByteSeq {
  int len = 0;
  uint8_t lo[4], hi[4];
};

// Splits [lo, hi] (no surrogates) into products of byte ranges.
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out) {
  if (lo > hi) return;
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && max < hi) {
      Utf8Sequences(lo, max, out);
      Utf8Sequences(max + 1, hi, out);
      return;
    }
  }
  if (hi > 0x7F) {
    for (int i = 1; i < 4; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;
      if ((lo & ~m) != (hi & ~m)) {
        if ((lo & m) != 0) {
          Utf8Sequences(lo, lo | m, out);
          Utf8Sequences((lo | m) + 1, hi, out);
          return;
        }
        if ((hi & m) != m) {
          Utf8Sequences(lo, (hi & ~m) - 1, out);
          Utf8Sequences(hi & ~m, hi, out);
          return;
        }
      }
    }
  }
  ByteSeq s;
  s.len = EncodeUtf8(lo, s.lo);
  EncodeUtf8(hi, s.hi);
  out->push_back(s);
}

class NfaBuilder {
 public:
  NfaBuilder(const RegexAst& ast, Nfa* nfa, size_t max_insts)
      : ast_(ast), nfa_(nfa), max_insts_(max_insts) {
    nullable_.assign(ast.nodes.size(), -1);
  }

  // Compiles the whole tree; false if the instruction limit was hit.
  bool Build(int32_t root) {
    NfaInst match;
    match.op = NfaInst::kMatch;
    int32_t m = Emit(match);
    int32_t start = Compile(root, m, m);
    if (start < 0) {
      NfaInst fail;  // an empty byte range: never matches
      fail.op = NfaInst::kByteRange;
      fail.lo = 1;
      fail.hi = 0;
      start = Emit(fail);
    }
    nfa_->start = start;
    return !overflow_;
  }

 private:
  int32_t Emit(const NfaInst& inst) {
    if (nfa_->insts.size() >= max_insts_) {
      overflow_ = true;
      return -1;
    }
    nfa_->insts.push_back(inst);
    return static_cast<int32_t>(nfa_->insts.size() - 1);
  }

  // Split preferring `a`; -1 is a dead branch.
  int32_t Split(int32_t a, int32_t b) {
    if (a < 0) return b;
    if (b < 0 || a == b) return a;
    NfaInst s;
    s.op = NfaInst::kSplit;
    s.out = a;
    s.out1 = b;
    return Emit(s);
  }

  bool Nullable(int32_t node) {
    if (nullable_[node] < 0) nullable_[node] = RegexNodeWidth(ast_, node).lo == 0 ? 1 : 0;
    return nullable_[node] == 1;
  }

  int32_t ByteRange(uint8_t lo, uint8_t hi, int32_t next) {
    auto key = std::make_tuple(lo, hi, next);
    auto it = suffix_cache_.find(key);
    if (it != suffix_cache_.end()) return it->second;
    NfaInst r;
    r.op = NfaInst::kByteRange;
    r.lo = lo;
    r.hi = hi;
    r.out = next;
    int32_t id = Emit(r);
    suffix_cache_[key] = id;
    return id;
  }

  int32_t CharClass(const CodePointSet& set, int32_t next) {
    if (next < 0) return -1;
    CodePointSet chars = set.Minus(CodePointSet::Between(0xD800, 0xDFFF));
    std::vector<ByteSeq> seqs;
    for (const CodePointSet::Range& r : chars.ranges()) Utf8Sequences(r.first, r.second, &seqs);
    std::vector<int32_t> heads;
    for (const ByteSeq& s : seqs) {
      int32_t cur = next;
      for (int k = s.len - 1; k >= 0; --k) cur = ByteRange(s.lo[k], s.hi[k], cur);
      if (cur >= 0 && std::find(heads.begin(), heads.end(), cur) == heads.end()) {
        heads.push_back(cur);
      }
    }
    int32_t entry = -1;
    for (auto it = heads.rbegin(); it != heads.rend(); ++it) entry = Split(*it, entry);
    return entry;
  }

  int32_t Compile(int32_t node, int32_t ke, int32_t kc) {
    if (overflow_) return -1;
    const RegexNode& n = ast_.nodes[node];
    if (!Nullable(node)) ke = kc;
    switch (n.op) {
      case RegexOp::kCharClass: {
        auto key = std::make_pair(node, kc);
        auto it = class_cache_.find(key);
        if (it != class_cache_.end()) return it->second;
        int32_t id = CharClass(n.chars, kc);
        class_cache_[key] = id;
        return id;
      }
      case RegexOp::kConcat:
        return Sequence(n.children, ke, kc);
      case RegexOp::kGroup:
        return Compile(n.children[0], ke, kc);
      case RegexOp::kAlternate: {
        std::vector<int32_t> entries;
        for (int32_t c : n.children) entries.push_back(Compile(c, ke, kc));
        int32_t entry = -1;
        for (auto it = entries.rbegin(); it != entries.rend(); ++it) entry = Split(*it, entry);
        return entry;
      }
      case RegexOp::kNegLookahead: {
        if (ke < 0) return -1;
        Nfa sub;
        NfaBuilder builder(ast_, &sub, max_insts_);
        if (!builder.Build(n.children[0])) overflow_ = true;
        nfa_->subs.push_back(std::move(sub));
        NfaInst la;
        la.op = NfaInst::kNegLookahead;
        la.sub = static_cast<int32_t>(nfa_->subs.size() - 1);
        la.out = ke;
        return Emit(la);
      }
      case RegexOp::kEndOfText: {
        if (ke < 0) return -1;
        NfaInst eot;
        eot.op = NfaInst::kEndOfText;
        eot.out = ke;
        return Emit(eot);
      }
      case RegexOp::kLookbehind: {
        if (ke < 0) return -1;
        NfaInst lb;
        lb.op = NfaInst::kLookbehind;
        lb.negative = n.negative;
        for (const CodePointSet::Range& r : n.chars.ranges()) {
          for (uint32_t c = r.first; c <= r.second && c < 256; ++c) {
            lb.set[c >> 6] |= uint64_t{1} << (c & 63);
          }
        }
        lb.out = ke;
        return Emit(lb);
      }
      case RegexOp::kRepeat:
        return Repeat(n, ke, kc);
    }
    return -1;
  }

  // Items in order: an item entered before anything was consumed continues
  // to the fresh entry of the rest, otherwise to its consumed entry.
  int32_t Sequence(const std::vector<int32_t>& items, int32_t ke, int32_t kc) {
    int32_t e = ke, c = kc;
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      int32_t ne = Compile(*it, e, c);
      int32_t nc = e == c ? ne : Compile(*it, c, c);
      e = ne;
      c = nc;
    }
    return e;
  }

  int32_t Loop(int32_t body, bool greedy, int32_t exit, int32_t again) {
    int32_t b = Compile(body, exit, again);
    return greedy ? Split(b, exit) : Split(exit, b);
  }

  int32_t Repeat(const RegexNode& n, int32_t ke, int32_t kc) {
    const int32_t body = n.children[0];
    int32_t opt_e, opt_c;  // the optional part entered fresh / after consuming
    if (n.max == kRegexMaxRepeat) {
      NfaInst placeholder;
      placeholder.op = NfaInst::kSplit;
      int32_t head = Emit(placeholder);
      if (head < 0) return -1;
      int32_t b = Compile(body, kc, head);
      FillLoopHead(head, b, kc, n.greedy);
      opt_c = head;
      opt_e = head;
      if (ke != kc) opt_e = Loop(body, n.greedy, ke, head);
    } else {
      uint64_t extra = n.max - n.min;
      opt_e = ke;
      opt_c = kc;
      if (extra > 0) {
        int32_t prev = kc;
        for (uint64_t t = 1; t < extra && !overflow_; ++t) prev = Loop(body, n.greedy, kc, prev);
        opt_c = Loop(body, n.greedy, kc, prev);
        opt_e = ke == kc ? opt_c : Loop(body, n.greedy, ke, prev);
      }
    }
    int32_t e = opt_e, c = opt_c;
    for (uint64_t i = 0; i < n.min && !overflow_; ++i) {
      int32_t ne = Compile(body, e, c);
      int32_t nc = e == c ? ne : Compile(body, c, c);
      e = ne;
      c = nc;
    }
    return e;
  }

  // A loop head emitted before its body: Split(body, exit) with dead
  // branches turned into a plain jump (or a never-matching range).
  void FillLoopHead(int32_t head, int32_t body, int32_t exit, bool greedy) {
    NfaInst& h = nfa_->insts[head];
    int32_t first = greedy ? body : exit;
    int32_t second = greedy ? exit : body;
    if (first >= 0 && second >= 0) {
      h.op = NfaInst::kSplit;
      h.out = first;
      h.out1 = second;
    } else if (first >= 0 || second >= 0) {
      h.op = NfaInst::kNop;
      h.out = first >= 0 ? first : second;
    } else {
      h.op = NfaInst::kByteRange;
      h.lo = 1;
      h.hi = 0;
      h.out = head;
    }
  }

  const RegexAst& ast_;
  Nfa* nfa_;
  size_t max_insts_;
  std::vector<int8_t> nullable_;
  std::map<std::tuple<uint8_t, uint8_t, int32_t>, int32_t> suffix_cache_;
  std::map<std::pair<int32_t, int32_t>, int32_t> class_cache_;
  bool overflow_ = false;
};

}  // namespace

Status CompileRegex(std::string_view pattern, std::string_view flags, std::string_view what,
                    Nfa* nfa, RegexWidth* width, size_t max_insts) {
  uint32_t bits = 0;
  for (char f : flags) {
    switch (f) {
      case 'i': bits |= kRegexIgnoreCase; break;
      case 's': bits |= kRegexDotAll; break;
      case 'x': bits |= kRegexVerbose; break;
      case 'm': bits |= kRegexMultiline; break;
      case 'u': bits |= kRegexUnicode; break;
      default:
        return Status(ErrorCode::kInvalidArgument, "terminal " + std::string(what) +
                                                       ": unknown regex flag '" +
                                                       std::string(1, f) + "'");
    }
  }
  RegexAst ast;
  CFGMASK_RETURN_IF_ERROR(ParseRegex(pattern, bits, what, &ast));
  for (RegexNode& n : ast.nodes) {
    if (n.op == RegexOp::kCharClass) n.chars = ResolveCharClass(n.spec);
  }
  *nfa = Nfa();
  NfaBuilder builder(ast, nfa, max_insts);
  if (!builder.Build(ast.root)) {
    *nfa = Nfa();
    return Status(ErrorCode::kResourceLimit,
                  "terminal " + std::string(what) + ": pattern needs more than " +
                      std::to_string(max_insts) + " NFA instructions (repeat counts too large)");
  }
  *width = RegexNodeWidth(ast, ast.root);
  return Status::Ok();
}

}  // namespace cfgmask
