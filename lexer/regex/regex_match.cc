// MatchPrefix: re.match() over a compiled Nfa by a Pike VM (Pike 1987, as
// described in Cox, "Regular Expression Matching: the Virtual Machine
// Approach").  Threads are kept in priority order: the epsilon closure is
// explored depth-first, `out` before `out1`, so list order is the order in
// which sre's backtracking would reach those states.  A state already in the
// list at this position is not added again (its earlier copy has the same
// future and higher priority), which also stops epsilon cycles.  When the
// highest-priority live thread reaches kMatch, every lower one is cut and
// the match length recorded; the run ends when no thread is left, and the
// last recorded length is Python's.  Look-aheads run the sub-NFA on the rest
// of the text; look-behinds test the byte before the position.
//
// This is the slow reference matcher (tests, Lark's "unless" analysis); the
// lexer's automata are built by the DFA construction, not from this code.
// Also Nfa::DebugString.  Tested by regex_test.cc.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lexer/regex/regex.h"

namespace cfgmask {
namespace {

class PikeVm {
 public:
  PikeVm(const Nfa& nfa, std::string_view text, int prev_byte)
      : nfa_(nfa), text_(text), prev_byte_(prev_byte), mark_(nfa.insts.size(), -1) {}

  int64_t Run() {
    std::vector<int32_t> clist, nlist;
    int64_t matched = -1;
    AddThread(&clist, nfa_.start, 0);
    for (size_t pos = 0; !clist.empty(); ++pos) {
      nlist.clear();
      for (int32_t id : clist) {
        const NfaInst& inst = nfa_.insts[id];
        if (inst.op == NfaInst::kMatch) {
          matched = static_cast<int64_t>(pos);
          break;  // lower-priority threads are cut
        }
        if (pos < text_.size()) {
          unsigned char b = static_cast<unsigned char>(text_[pos]);
          if (b >= inst.lo && b <= inst.hi) AddThread(&nlist, inst.out, pos + 1);
        }
      }
      if (pos >= text_.size()) break;
      clist.swap(nlist);
    }
    return matched;
  }

 private:
  void AddThread(std::vector<int32_t>* list, int32_t start, size_t pos) {
    const int64_t gen = static_cast<int64_t>(pos);
    stack_.clear();
    stack_.push_back(start);
    while (!stack_.empty()) {
      int32_t id = stack_.back();
      stack_.pop_back();
      if (id < 0 || mark_[id] == gen) continue;
      mark_[id] = gen;
      const NfaInst& inst = nfa_.insts[id];
      switch (inst.op) {
        case NfaInst::kByteRange:
        case NfaInst::kMatch:
          list->push_back(id);
          break;
        case NfaInst::kNop:
          stack_.push_back(inst.out);
          break;
        case NfaInst::kSplit:
          stack_.push_back(inst.out1);
          stack_.push_back(inst.out);
          break;
        case NfaInst::kNegLookahead: {
          int prev = pos > 0 ? static_cast<unsigned char>(text_[pos - 1]) : prev_byte_;
          if (MatchPrefix(nfa_.subs[inst.sub], text_.substr(pos), prev) < 0) {
            stack_.push_back(inst.out);
          }
          break;
        }
        case NfaInst::kLookbehind: {
          int prev = pos > 0 ? static_cast<unsigned char>(text_[pos - 1]) : prev_byte_;
          bool in = prev >= 0 && ((inst.set[prev >> 6] >> (prev & 63)) & 1) != 0;
          if (in != inst.negative) stack_.push_back(inst.out);
          break;
        }
        case NfaInst::kEndOfText:
          if (pos == text_.size()) stack_.push_back(inst.out);
          break;
      }
    }
  }

  const Nfa& nfa_;
  std::string_view text_;
  int prev_byte_;
  std::vector<int64_t> mark_;  // position at which each inst was last listed
  std::vector<int32_t> stack_;
};

std::string ByteName(int b) {
  static const char kHex[] = "0123456789abcdef";
  if (b > 0x20 && b < 0x7F && b != '\\') return std::string(1, static_cast<char>(b));
  return std::string("\\x") + kHex[b >> 4] + kHex[b & 15];
}

void Dump(const Nfa& nfa, const std::string& indent, std::string* out) {
  *out += indent + "start " + std::to_string(nfa.start) + "\n";
  for (size_t i = 0; i < nfa.insts.size(); ++i) {
    const NfaInst& in = nfa.insts[i];
    *out += indent + std::to_string(i) + ": ";
    switch (in.op) {
      case NfaInst::kByteRange:
        *out += "byte [" + ByteName(in.lo) + "-" + ByteName(in.hi) + "] -> " +
                std::to_string(in.out);
        break;
      case NfaInst::kSplit:
        *out += "split -> " + std::to_string(in.out) + ", " + std::to_string(in.out1);
        break;
      case NfaInst::kNop:
        *out += "nop -> " + std::to_string(in.out);
        break;
      case NfaInst::kMatch:
        *out += "match";
        break;
      case NfaInst::kNegLookahead:
        *out += "neg-lookahead sub " + std::to_string(in.sub) + " -> " + std::to_string(in.out);
        break;
      case NfaInst::kEndOfText:
        *out += "end-of-text -> " + std::to_string(in.out);
        break;
      case NfaInst::kLookbehind: {
        *out += std::string(in.negative ? "neg-" : "") + "lookbehind {";
        for (int b = 0; b < 256; ++b) {
          if ((in.set[b >> 6] >> (b & 63)) & 1) *out += ByteName(b);
        }
        *out += "} -> " + std::to_string(in.out);
        break;
      }
    }
    *out += "\n";
  }
  for (size_t s = 0; s < nfa.subs.size(); ++s) {
    *out += indent + "sub " + std::to_string(s) + ":\n";
    Dump(nfa.subs[s], indent + "  ", out);
  }
}

}  // namespace

int64_t MatchPrefix(const Nfa& nfa, std::string_view text, int prev_byte) {
  if (nfa.insts.empty()) return -1;
  PikeVm vm(nfa, text, prev_byte);
  return vm.Run();
}

std::string Nfa::DebugString() const {
  std::string out;
  Dump(*this, "", &out);
  return out;
}

}  // namespace cfgmask
