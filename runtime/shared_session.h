// A session that several threads may reach (a server's matcher, the Python
// GrammarMatcher): it serves one call at a time, and a call that finds it
// busy in another thread fails with ErrorCode::kBusy, "in use by another
// thread", instead of racing on it.  A busy session is never a refusal: the
// refusal of a token stays kInvalidToken, and a caller that treats kBusy as
// a refusal reports a valid token as refused.
//
// The guard is one atomic flag, taken for the length of a call (Hold) and
// released when the Hold ends; nothing waits, nothing blocks.  The Session
// itself stays unsynchronized (runtime/session.h): the calls below, or a
// Hold around any other use, are what make sharing it safe.  A batch call
// holds each of its sessions for its length (a Hold per session).
#ifndef CFGMASK_RUNTIME_SHARED_SESSION_H_
#define CFGMASK_RUNTIME_SHARED_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "grammar/base/status.h"
#include "runtime/session.h"

namespace cfgmask {

// The message of a busy session (ErrorCode::kBusy).
extern const char kSessionBusyMessage[];

class SharedSession {
 public:
  SharedSession(const CompiledStore* store, SessionLimits limits = {},
                std::shared_ptr<RowMemo> memo = nullptr)
      : session_(store, limits, std::move(memo)) {}
  // A copy of `session` (a fork, taken while holding its source).
  explicit SharedSession(Session session) : session_(std::move(session)) {}
  SharedSession(const SharedSession&) = delete;
  SharedSession& operator=(const SharedSession&) = delete;

  // The session for the length of one call.  ok() false (the session busy
  // in another thread): status() is the kBusy error and nothing is held.
  class Hold {
   public:
    explicit Hold(SharedSession* s) : s_(s) {
      bool expected = false;
      if (!s_->busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
        s_ = nullptr;
      }
    }
    ~Hold() {
      if (s_ != nullptr) s_->busy_.store(false, std::memory_order_release);
    }
    Hold(Hold&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    Hold& operator=(Hold&&) = delete;

    bool ok() const { return s_ != nullptr; }
    Status status() const { return ok() ? Status::Ok() : Status(ErrorCode::kBusy, kSessionBusyMessage); }
    // Only when ok().
    Session& session() const { return s_->session_; }
    Session* operator->() const { return &s_->session_; }

   private:
    SharedSession* s_;
  };
  Hold Take() { return Hold(this); }

  // The calls of the Python API, each holding the session for its length;
  // kBusy when another thread holds it.
  Status Advance(int32_t token);
  Status AdvanceBytes(std::string_view bytes);
  Status Rollback(int32_t k);
  // FillMask, then the session's store_status (a damaged row of the store
  // is an error, and `mask` must not be served).
  Status FillMask(uint32_t* mask);
  Status Reset();
  Status SetSuffix(std::string suffix);
  Status CanEnd(bool* can_end);
  Status IsTerminated(bool* terminated);
  Status JumpForwardString(int32_t max_bytes, std::string* out);
  Status HistoryLength(int32_t* n);
  Status Text(std::string* text);
  // A new shared session continuing from this one's state.
  Status Fork(std::unique_ptr<SharedSession>* out);

  // The session without the guard: for a caller that holds it otherwise
  // (a Hold it keeps) or that alone can reach it.
  Session& unguarded() { return session_; }
  const Session& unguarded() const { return session_; }

 private:
  Session session_;
  std::atomic<bool> busy_{false};
};

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_SHARED_SESSION_H_
