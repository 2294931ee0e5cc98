// StopCheck: the compile's wall-clock budget (--max-seconds, max_seconds)
// and its caller's interrupt (Ctrl-C from Python), looked at inside the long
// loops of a phase (the terminal automaton's build, the LALR(1)
// construction, the streamlining steps), not only as each phase ends.
//
// A loop calls Poll() once per iteration; every kEvery-th call reads the
// clock (a few nanoseconds per iteration in all), and:
//  - past the deadline, Poll returns the budget's kResourceLimit error,
//    "FILE: compile exceeded S s (max_seconds, --max-seconds) in the PHASE
//    phase";
//  - at most every kHookSeconds, it calls the hook (the compile's progress
//    report, where the Python binding looks for signals; the hook may
//    throw, and the exception leaves the loop: call Poll only on the
//    thread that runs the compile, never on a helper thread).
// A default StopCheck never stops and never calls anything.  A loop that
// runs on helper threads polls with Expired() (clock only, thread-safe).
#ifndef CFGMASK_GRAMMAR_BASE_STOP_CHECK_H_
#define CFGMASK_GRAMMAR_BASE_STOP_CHECK_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "grammar/base/status.h"

namespace cfgmask {

class StopCheck {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint32_t kEvery = 256;       // iterations between clock reads
  static constexpr double kHookSeconds = 0.05;  // between hook calls

  StopCheck() = default;
  // `over_budget`: the budget's message up to " in the PHASE phase";
  // `has_deadline` false: no budget (hook only).
  // `every` and `hook_seconds` (kEvery, kHookSeconds) are for tests.
  StopCheck(bool has_deadline, Clock::time_point deadline, std::string over_budget,
            std::function<void(const char* phase)> hook, uint32_t every = kEvery,
            double hook_seconds = kHookSeconds)
      : has_deadline_(has_deadline),
        deadline_(deadline),
        over_budget_(std::move(over_budget)),
        hook_(std::move(hook)),
        last_hook_(Clock::now()),
        every_(every < 1 ? 1 : every),
        hook_seconds_(hook_seconds) {}

  // Once per iteration of a long loop of `phase`.
  Status Poll(const char* phase) {
    if (++count_ % every_ != 0) return Status::Ok();
    return Now(phase);
  }
  // The clock and the hook now (between steps that are long themselves).
  Status Now(const char* phase) {
    if (!has_deadline_ && !hook_) return Status::Ok();
    const Clock::time_point now = Clock::now();
    if (has_deadline_ && now > deadline_) {
      return Status(ErrorCode::kResourceLimit,
                    over_budget_ + " in the " + std::string(phase) + " phase");
    }
    if (hook_ && std::chrono::duration<double>(now - last_hook_).count() >= hook_seconds_) {
      last_hook_ = now;
      hook_(phase);
    }
    return Status::Ok();
  }
  // The deadline alone, from any thread.
  bool Expired() const { return has_deadline_ && Clock::now() > deadline_; }
  Status BudgetError(const char* phase) const {
    return Status(ErrorCode::kResourceLimit, over_budget_ + " in the " + std::string(phase) + " phase");
  }

 private:
  bool has_deadline_ = false;
  Clock::time_point deadline_;
  std::string over_budget_;
  std::function<void(const char*)> hook_;
  Clock::time_point last_hook_;
  uint32_t every_ = kEvery;
  double hook_seconds_ = kHookSeconds;
  uint32_t count_ = 0;
};

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_BASE_STOP_CHECK_H_
