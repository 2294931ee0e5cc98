// Teacher forcing of a text through a Session: see teacher_force.h.
#include "runtime/tools/teacher_force.h"

#include <algorithm>
#include <set>
#include <string>

namespace cfgmask {

TeacherForceResult TeacherForce(const CompiledStore& store, Session* session,
                                std::string_view file, std::string_view text,
                                const std::vector<Segment>& steps, int64_t verify_masks) {
  TeacherForceResult r;
  const size_t n = steps.size();
  // Mask checks at steps 0..n (step n: the end of the file, where only EOS
  // matters); --verify-masks picks N of them evenly.
  std::set<size_t> verify_at;
  for (int64_t k = 0; k < verify_masks && static_cast<size_t>(k) <= n; ++k) {
    verify_at.insert(verify_masks >= static_cast<int64_t>(n + 1)
                         ? static_cast<size_t>(k)
                         : static_cast<size_t>(k * static_cast<int64_t>(n + 1) / verify_masks));
  }
  session->Reset();
  std::string& failure = r.failure;
  int64_t mismatches = 0;
  int64_t& raw_bytes = r.raw_bytes;
  std::vector<uint32_t> mask(store.mask_words());
  for (size_t i = 0; i <= n && failure.empty(); ++i) {
    const bool at_end = i == n;
    const size_t offset = at_end ? text.size() : static_cast<size_t>(steps[i].offset);
    const bool need_mask = verify_at.count(i) || at_end || steps[i].token >= 0;
    if (need_mask) session->FillMask(mask.data());
    if (verify_at.count(i)) {
      int64_t here = 0;
      for (int32_t tok = 0; tok < store.vocab_size; ++tok) {
        const bool fast = MaskAllows(mask, tok), slow = session->AllowsSlow(tok);
        if (fast == slow) continue;
        if (++here <= 3) {
          r.notes.push_back(TextPosition(file, text, offset) + ": mask mismatch: " +
                            TokenLabel(store, tok) + " is " + (fast ? "allowed" : "refused") +
                            " by the mask, " + (slow ? "allowed" : "refused") +
                            " by the slow reference");
        }
      }
      if (here > 3) {
        r.notes.push_back(TextPosition(file, text, offset) + ": mask mismatch: " +
                          std::to_string(here) + " tokens in all at this step");
      }
      mismatches += here;
    }
    if (at_end) {
      const bool can_end = session->CanEnd();
      bool eos_in_mask = false;
      for (int32_t e : store.eos_ids) eos_in_mask |= MaskAllows(mask, e);
      if (!can_end) {
        failure = TextPosition(file, text, offset) + ": end of file: EOS is not allowed";
      } else if (!eos_in_mask && !store.eos_ids.empty()) {
        failure = TextPosition(file, text, offset) +
                  ": end of file: CanEnd() is true but no EOS id is in the mask";
      }
      break;
    }
    const Segment& seg = steps[i];
    Status st;
    if (seg.token >= 0) {
      if (!MaskAllows(mask, seg.token)) {
        failure = TextPosition(file, text, offset) + ": " + TokenLabel(store, seg.token) +
                  " is not in the mask (slow reference: " +
                  (session->AllowsSlow(seg.token) ? "allowed" : "refused") + ")";
        break;
      }
      st = session->Advance(seg.token);
      if (!st.ok()) {
        failure = TextPosition(file, text, offset) + ": " + TokenLabel(store, seg.token) +
                  " is in the mask but Advance refuses it: " + OneLine(st.message());
      }
    } else {
      ++raw_bytes;
      st = session->AdvanceBytes(std::string_view(text).substr(offset, seg.length));
      if (!st.ok()) {
        failure = TextPosition(file, text, offset) + ": byte \"" +
                  Printable(std::string_view(text).substr(offset, 1)) +
                  "\" refused: " + OneLine(st.message());
      }
    }
  }
  if (failure.empty() && mismatches > 0) {
    failure = std::string(file) + ": " + std::to_string(mismatches) +
              " mask bits differ from the slow reference";
  }
  return r;
}

}  // namespace cfgmask
