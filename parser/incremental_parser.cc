// IncrementalParser: the LR driver of Lark's ParserState.feed_token
// (lark/parsers/lalr_parser_state.py) on a persistent stack.
//
// A simulation walks the action table from the top state: a shift ends it, an
// error rejects, accept (only on $END, in the end state) accepts, and a
// reduction by A -> w pops |w| states, first from the overlay, then by moving
// the base pointer down the shared nodes, and pushes Goto(top, A) onto the
// overlay.  Nothing shared is written, so Accepts() is const and allocation
// free; Consume() reruns the simulation and materialises the overlay plus the
// shifted state as new nodes above the base.
//
// Each node carries its depth and a hash of the whole stack below it
// (chained: hash(parent) mixed with the state), so Hash() is O(1) and
// operator== compares depth and hash before walking the two stacks down to
// their first shared node.
//
// A cyclic grammar (A =>+ A) can make the reductions on one terminal go on
// forever, where Lark's parser hangs; we reject the terminal instead.  Once
// the stack's base stops moving down (it can do so only Depth() times), an
// endless chain either repeats a configuration exactly or grows the overlay
// without bound.  Brent's cycle detection catches the first: after 2^k
// reductions (k >= 6) the configuration is saved and compared with every
// later one until 2^(k+1); the second is cut at kMaxOverlay states.  Chains
// of fewer than 64 reductions, i.e. all of them in real grammars, never
// reach either check.
// Tested by incremental_parser_test.cc.
#include "parser/incremental_parser.h"

#include <algorithm>

#include "grammar/check.h"

namespace cfgmask {
namespace {

constexpr int64_t kFirstCycleCheck = 64;
constexpr int32_t kMaxOverlay = int32_t{1} << 16;

uint64_t MixState(uint64_t parent_hash, int32_t state) {
  uint64_t z = parent_hash + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(state) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

IncrementalParser::Node* IncrementalParser::NewNode(int32_t state, Node* parent) {
  Node* node = new Node;
  node->state = state;
  node->depth = parent == nullptr ? 1 : parent->depth + 1;
  node->hash = MixState(parent == nullptr ? 0 : parent->hash, state);
  node->parent = parent;
  node->refs.store(1, std::memory_order_relaxed);
  return node;
}

void IncrementalParser::Retain(const Node* node) {
  const_cast<Node*>(node)->refs.fetch_add(1, std::memory_order_relaxed);
}

void IncrementalParser::Release(const Node* node) {
  // Iterative, so that dropping a deep stack does not recurse.
  while (node != nullptr &&
         const_cast<Node*>(node)->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    const Node* parent = node->parent;
    delete node;
    node = parent;
  }
}

IncrementalParser::IncrementalParser(const ParseTables* tables, int start_index)
    : tables_(tables),
      action_(tables->action.data()),
      num_terminals_(tables->num_terminals),
      top_(NewNode(tables->start_state.at(start_index), nullptr)) {}

IncrementalParser::IncrementalParser(const IncrementalParser& other)
    : tables_(other.tables_),
      action_(other.action_),
      num_terminals_(other.num_terminals_),
      top_(other.top_) {
  Retain(top_);
}

IncrementalParser::IncrementalParser(IncrementalParser&& other) noexcept
    : tables_(other.tables_),
      action_(other.action_),
      num_terminals_(other.num_terminals_),
      top_(other.top_) {
  // A moved-from parser keeps a valid stack: it shares the node.
  Retain(top_);
}

IncrementalParser& IncrementalParser::operator=(const IncrementalParser& other) {
  if (this == &other) return *this;
  Retain(other.top_);
  Release(top_);
  tables_ = other.tables_;
  action_ = other.action_;
  num_terminals_ = other.num_terminals_;
  top_ = other.top_;
  return *this;
}

IncrementalParser& IncrementalParser::operator=(IncrementalParser&& other) noexcept {
  std::swap(tables_, other.tables_);
  std::swap(action_, other.action_);
  std::swap(num_terminals_, other.num_terminals_);
  std::swap(top_, other.top_);
  return *this;
}

IncrementalParser::~IncrementalParser() { Release(top_); }

IncrementalParser::Outcome IncrementalParser::Simulate(int32_t terminal, int32_t* overlay,
                                                       int32_t capacity, Cursor* cursor) const {
  const ParseTables& t = *tables_;
  const int32_t* rule_length = t.rule_length.data();
  const int32_t* rule_lhs = t.rule_lhs.data();
  const int32_t* goto_table = t.goto_table.data();
  const size_t num_nonterminals = static_cast<size_t>(t.num_nonterminals);
  const Node* base = top_;
  int32_t size = 0;
  int32_t state = top_->state;
  // Brent's saved configuration; only used past kFirstCycleCheck reductions.
  std::vector<int32_t> saved_overlay;
  const Node* saved_base = nullptr;
  int64_t next_save = kFirstCycleCheck;
  for (int64_t reductions = 0;; ++reductions) {
    if (reductions >= kFirstCycleCheck) {
      if (reductions == next_save) {
        saved_base = base;
        saved_overlay.assign(overlay, overlay + size);
        next_save *= 2;
      } else if (base == saved_base && size == static_cast<int32_t>(saved_overlay.size()) &&
                 std::equal(overlay, overlay + size, saved_overlay.begin())) {
        return Outcome::kReject;
      }
      if (size >= kMaxOverlay) return Outcome::kReject;
    }
    const int32_t action = action_[static_cast<size_t>(state) * num_terminals_ + terminal];
    if (action > 0) {
      *cursor = {base, size, action - 1};
      return Outcome::kShift;
    }
    if (action == 0) return Outcome::kReject;
    if (action == kAcceptAction) {
      *cursor = {base, size, -1};
      return Outcome::kAccept;
    }
    const int32_t rule = -action - 1;
    int32_t pop = rule_length[rule];
    const int32_t from_overlay = pop < size ? pop : size;
    size -= from_overlay;
    for (pop -= from_overlay; pop > 0; --pop) base = base->parent;
    const int32_t below = size > 0 ? overlay[size - 1] : base->state;
    if (size == capacity) return Outcome::kOverflow;
    state = goto_table[static_cast<size_t>(below) * num_nonterminals + rule_lhs[rule]];
    CFGMASK_DCHECK(state >= 0);
    overlay[size++] = state;
  }
}

IncrementalParser::Outcome IncrementalParser::Run(int32_t terminal, int32_t* inline_overlay,
                                                  std::vector<int32_t>* spill, Cursor* cursor,
                                                  const int32_t** overlay) const {
  Outcome outcome = Simulate(terminal, inline_overlay, kInlineOverlay, cursor);
  *overlay = inline_overlay;
  for (size_t capacity = 4 * kInlineOverlay; outcome == Outcome::kOverflow; capacity *= 4) {
    spill->resize(capacity);
    outcome = Simulate(terminal, spill->data(), static_cast<int32_t>(capacity), cursor);
    *overlay = spill->data();
  }
  return outcome;
}

bool IncrementalParser::AcceptsAfterReductions(int32_t terminal) const {
  int32_t inline_overlay[kInlineOverlay];
  std::vector<int32_t> spill;
  Cursor cursor;
  const int32_t* overlay;
  const Outcome outcome = Run(terminal, inline_overlay, &spill, &cursor, &overlay);
  return outcome == (terminal == tables_->end_terminal ? Outcome::kAccept : Outcome::kShift);
}

bool IncrementalParser::AcceptsEnd() const { return Accepts(tables_->end_terminal); }

bool IncrementalParser::Consume(int32_t terminal) {
  if (terminal == tables_->end_terminal) return AcceptsEnd();
  int32_t inline_overlay[kInlineOverlay];
  std::vector<int32_t> spill;
  Cursor cursor;
  const int32_t* overlay;
  if (Run(terminal, inline_overlay, &spill, &cursor, &overlay) != Outcome::kShift) return false;
  Node* node = const_cast<Node*>(cursor.base);
  Retain(node);
  for (int32_t i = 0; i < cursor.overlay_size; ++i) node = NewNode(overlay[i], node);
  node = NewNode(cursor.shift_state, node);
  Release(top_);
  top_ = node;
  return true;
}

std::vector<int32_t> IncrementalParser::StateStack() const {
  std::vector<int32_t> states(top_->depth);
  size_t i = states.size();
  for (const Node* n = top_; n != nullptr; n = n->parent) states[--i] = n->state;
  return states;
}

bool IncrementalParser::operator==(const IncrementalParser& other) const {
  if (tables_ != other.tables_) return false;
  const Node* a = top_;
  const Node* b = other.top_;
  if (a->depth != b->depth || a->hash != b->hash) return false;
  for (; a != b; a = a->parent, b = b->parent) {
    if (a->state != b->state) return false;
  }
  return true;
}

std::string IncrementalParser::DebugString() const {
  std::string text = "[";
  for (int32_t s : StateStack()) {
    if (text.size() > 1) text += ' ';
    text += std::to_string(s);
  }
  return text + "]";
}

}  // namespace cfgmask
