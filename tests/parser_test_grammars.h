// Grammars for the parser tests (lalr_test.cc, bison_export_test.cc,
// incremental_parser_test.cc), built in memory without the .lark reader: a
// one-line BNF notation for textbook grammars, and small random grammars from
// a fixed seed (every nonterminal reachable from the start and productive, so
// that Bison, which deletes useless rules, builds the same automaton).
#ifndef CFGMASK_TESTS_PARSER_TEST_GRAMMARS_H_
#define CFGMASK_TESTS_PARSER_TEST_GRAMMARS_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace cfgmask {
namespace parser_test {

// "lhs: a b | c ; lhs2.3: d": names left of ':' are nonterminals, every other
// name a terminal (ids in order of first appearance); "lhs.N" gives its rules
// priority N; an empty alternative is an epsilon rule.  The first rule's left
// side is the start symbol.
inline Grammar MakeGrammar(const std::string& spec) {
  struct Alt {
    std::string lhs;
    std::vector<std::string> rhs;
    int32_t priority;
  };
  std::vector<Alt> alts;
  std::vector<std::string> lhs_names;
  std::stringstream rules(spec);
  std::string rule_text;
  while (std::getline(rules, rule_text, ';')) {
    const size_t colon = rule_text.find(':');
    if (colon == std::string::npos) continue;
    std::stringstream lhs_stream(rule_text.substr(0, colon));
    std::string lhs;
    lhs_stream >> lhs;
    int32_t priority = 0;
    if (const size_t dot = lhs.find('.'); dot != std::string::npos) {
      priority = std::stoi(lhs.substr(dot + 1));
      lhs = lhs.substr(0, dot);
    }
    if (std::find(lhs_names.begin(), lhs_names.end(), lhs) == lhs_names.end()) {
      lhs_names.push_back(lhs);
    }
    std::stringstream body(rule_text.substr(colon + 1) + "|");
    std::string alt_text;
    while (std::getline(body, alt_text, '|')) {
      Alt alt{lhs, {}, priority};
      std::stringstream words(alt_text);
      std::string word;
      while (words >> word) alt.rhs.push_back(word);
      alts.push_back(alt);
    }
  }
  std::vector<std::string> terminal_names;
  for (const Alt& alt : alts) {
    for (const std::string& s : alt.rhs) {
      if (std::find(lhs_names.begin(), lhs_names.end(), s) == lhs_names.end() &&
          std::find(terminal_names.begin(), terminal_names.end(), s) == terminal_names.end()) {
        terminal_names.push_back(s);
      }
    }
  }
  Grammar g;
  for (const std::string& name : terminal_names) {
    TerminalDef t;
    t.name = name;
    t.value = name;
    g.terminals.push_back(t);
  }
  g.nonterminals = lhs_names;
  auto id = [&](const std::string& name) -> SymbolId {
    auto nt = std::find(lhs_names.begin(), lhs_names.end(), name);
    if (nt != lhs_names.end()) {
      return g.num_terminals() + static_cast<SymbolId>(nt - lhs_names.begin());
    }
    return static_cast<SymbolId>(
        std::find(terminal_names.begin(), terminal_names.end(), name) - terminal_names.begin());
  };
  std::map<std::string, int32_t> order;
  for (const Alt& alt : alts) {
    Rule r;
    r.lhs = id(alt.lhs);
    for (const std::string& s : alt.rhs) r.rhs.push_back(id(s));
    r.priority = alt.priority;
    r.order = order[alt.lhs]++;
    g.rules.push_back(r);
  }
  g.start = {lhs_names.at(0)};
  return g;
}

// Textbook and hand-made grammars, LALR(1) or not.
inline std::vector<std::string> TextbookGrammars() {
  return {
      "E: E + T | T; T: T * F | F; F: ( E ) | id",                   // ASU 4.19
      "S: C C; C: c C | d",                                          // ASU 4.55
      "S: L = R | R; L: * R | id; R: L",                             // ASU 4.48
      "S: A B c; A: a | ; B: b | ",                                  // nullable reads
      "S: a X | ( S ); X: x Y; Y: y | ",                             // includes
      "S: if E then S | if E then S else S | x; E: b",               // dangling else
      "S: a A d | b B d | a B e | b A e; A: c; B: c",                // LR(1), not LALR
      "S: a A d | b B d | a B e | b A e; A.2: c; B: c",              // same, priorities
      "s: x A | y A | A B | A x; x: A; y: A",                        // s/r + r/r
      "s: x | A; x: s",                                              // cyclic
      "E: E + E | E * E | ( E ) | n",                                // ambiguous
      "S: S S | ( S ) | ",                                           // Dyck, ambiguous
      "L: L , e | e | ",                                             // left list
      "L: e , L | e",                                                // right list
      "P: D x S; D: D d | ; S: S s | s",                             // sequences
      "S: a S b | a b",                                              // a^n b^n
      "J: v | { M } | [ A ]; M: p | M , p; p: k : v | k : J; A: J | A , J",
      "S: A; A: B; B: C; C: D | x; D: A y | z",                      // unit chains
      "S: a B C D e; B: b | ; C: c | ; D: d | ",                     // many nullables
  };
}

// A random grammar, deterministic in `seed` on every platform (mt19937 is
// specified by the standard; the distributions are not, so they are not used).
// Nonterminals n0 (the start) ... n{k-1}, terminals A, B, ...; one in five
// rules gets priority 1 or 2.
inline Grammar RandomGrammar(uint32_t seed) {
  std::mt19937 rng(seed);
  auto below = [&](uint32_t n) { return static_cast<int32_t>(rng() % n); };
  while (true) {
    const int32_t num_terminals = 1 + below(4);
    const int32_t num_nonterminals = 1 + below(5);
    Grammar g;
    for (int32_t t = 0; t < num_terminals; ++t) {
      TerminalDef def;
      def.name = std::string(1, static_cast<char>('A' + t));
      def.value = def.name;
      g.terminals.push_back(def);
    }
    for (int32_t k = 0; k < num_nonterminals; ++k) g.nonterminals.push_back("n" + std::to_string(k));
    std::set<std::pair<int32_t, std::vector<int32_t>>> seen;
    for (int32_t k = 0; k < num_nonterminals; ++k) {
      const int32_t alternatives = 1 + below(3);
      for (int32_t a = 0; a < alternatives; ++a) {
        Rule r;
        r.lhs = num_terminals + k;
        const int32_t length = below(6) == 0 ? 0 : 1 + below(4);
        for (int32_t i = 0; i < length; ++i) {
          r.rhs.push_back(below(2) == 0 ? below(num_terminals) : num_terminals + below(num_nonterminals));
        }
        if (!seen.insert({r.lhs, r.rhs}).second) continue;
        r.priority = below(5) == 0 ? 1 + below(2) : 0;
        r.order = a;
        g.rules.push_back(r);
      }
    }
    g.start = {"n0"};
    // Productive: derives some terminal string.
    std::vector<uint8_t> productive(num_nonterminals, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (const Rule& r : g.rules) {
        if (productive[r.lhs - num_terminals]) continue;
        bool all = true;
        for (SymbolId s : r.rhs) all = all && (s < num_terminals || productive[s - num_terminals]);
        if (all) productive[r.lhs - num_terminals] = changed = true;
      }
    }
    // Reachable from n0.
    std::vector<uint8_t> reached(num_nonterminals, 0);
    reached[0] = 1;
    for (bool changed = true; changed;) {
      changed = false;
      for (const Rule& r : g.rules) {
        if (!reached[r.lhs - num_terminals]) continue;
        for (SymbolId s : r.rhs) {
          if (s >= num_terminals && !reached[s - num_terminals]) reached[s - num_terminals] = changed = true;
        }
      }
    }
    bool ok = true;
    for (int32_t k = 0; k < num_nonterminals; ++k) ok = ok && productive[k] && reached[k];
    if (ok) return g;
  }
}

}  // namespace parser_test
}  // namespace cfgmask

#endif  // CFGMASK_TESTS_PARSER_TEST_GRAMMARS_H_
