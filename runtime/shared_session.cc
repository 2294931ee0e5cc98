#include "runtime/shared_session.h"

namespace cfgmask {

const char kSessionBusyMessage[] =
    "session in use by another thread: a session serves one thread at a time (a fork gives "
    "each thread its own)";

Status SharedSession::Advance(int32_t token) {
  Hold h(this);
  if (!h.ok()) return h.status();
  return session_.Advance(token);
}

Status SharedSession::AdvanceBytes(std::string_view bytes) {
  Hold h(this);
  if (!h.ok()) return h.status();
  return session_.AdvanceBytes(bytes);
}

Status SharedSession::Rollback(int32_t k) {
  Hold h(this);
  if (!h.ok()) return h.status();
  return session_.Rollback(k);
}

Status SharedSession::FillMask(uint32_t* mask) {
  Hold h(this);
  if (!h.ok()) return h.status();
  session_.FillMask(mask);
  return session_.store_status();
}

Status SharedSession::Reset() {
  Hold h(this);
  if (!h.ok()) return h.status();
  session_.Reset();
  return Status::Ok();
}

Status SharedSession::SetSuffix(std::string suffix) {
  Hold h(this);
  if (!h.ok()) return h.status();
  session_.SetSuffix(std::move(suffix));
  return Status::Ok();
}

Status SharedSession::CanEnd(bool* can_end) {
  Hold h(this);
  if (!h.ok()) return h.status();
  *can_end = session_.CanEnd();
  return Status::Ok();
}

Status SharedSession::IsTerminated(bool* terminated) {
  Hold h(this);
  if (!h.ok()) return h.status();
  *terminated = session_.IsTerminated();
  return Status::Ok();
}

Status SharedSession::JumpForwardString(int32_t max_bytes, std::string* out) {
  Hold h(this);
  if (!h.ok()) return h.status();
  *out = session_.JumpForwardString(max_bytes);
  return Status::Ok();
}

Status SharedSession::HistoryLength(int32_t* n) {
  Hold h(this);
  if (!h.ok()) return h.status();
  *n = session_.HistoryLength();
  return Status::Ok();
}

Status SharedSession::Text(std::string* text) {
  Hold h(this);
  if (!h.ok()) return h.status();
  *text = session_.text();
  return Status::Ok();
}

Status SharedSession::Fork(std::unique_ptr<SharedSession>* out) {
  Hold h(this);
  if (!h.ok()) return h.status();
  *out = std::make_unique<SharedSession>(session_.Fork());
  return Status::Ok();
}

}  // namespace cfgmask
