// Teacher forcing of a text through a Session (`cfgmask check`): every step
// of a segmentation of the text is checked against the session's mask
// before it is taken, the end of the text must allow EOS, and at chosen
// steps the whole mask is compared with the session's slow per-token
// reference (Session::AllowsSlow).  The first refused step ends the run
// with a one-line reason "FILE:LINE:COL: ...".
// Tested by tests/py/test_cli.py and tests/py/test_cli_corpus.py (check).
#ifndef CFGMASK_RUNTIME_TOOLS_TEACHER_FORCE_H_
#define CFGMASK_RUNTIME_TOOLS_TEACHER_FORCE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/segment.h"
#include "runtime/session.h"

namespace cfgmask {

struct TeacherForceResult {
  std::string failure;              // empty: the text passed
  std::vector<std::string> notes;   // mask mismatches found on the way, in order
  int64_t raw_bytes = 0;            // steps that were single bytes with no token
};

// Resets `session` and forces `steps` (a segmentation of `text`, read from
// `file`) through it.  `verify_masks` steps out of the steps and the end,
// spread evenly, have their whole mask compared with the slow reference; a
// mismatch fails the text.
TeacherForceResult TeacherForce(const CompiledStore& store, Session* session,
                                std::string_view file, std::string_view text,
                                const std::vector<Segment>& steps, int64_t verify_masks);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_TOOLS_TEACHER_FORCE_H_
