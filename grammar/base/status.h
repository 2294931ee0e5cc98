// Status: the result of every operation on user input (grammar text, regexes,
// tokenizer files, store files, token ids).  A closed set of error codes plus a
// one-line message that names the offending input and its position, in the
// form "FILE:LINE:COL: what is wrong".  Internal invariants use CFGMASK_CHECK
// (check.h) instead.  Tested by lark_reader_test.cc and resource_limits_test.cc.
#ifndef CFGMASK_GRAMMAR_BASE_STATUS_H_
#define CFGMASK_GRAMMAR_BASE_STATUS_H_

#include <string>
#include <utility>

namespace cfgmask {

enum class ErrorCode {
  kOk = 0,            // success
  kGrammarSyntax,     // .lark text does not parse
  kGrammarSemantics,  // undefined symbol, bad template use, conflict, ...
  kRegexSyntax,       // terminal pattern is not valid Python re syntax
  kRegexUnsupported,  // valid Python re, but not regular / not supported
  kTokenizer,         // tokenizer file malformed or unsupported
  kStoreFile,         // store file truncated, corrupted, wrong version
  kInvalidToken,      // token id out of range or not allowed here
  kResourceLimit,     // a configured limit (states, memory) was exceeded
  kIo,                // file could not be read or written
  kInvalidArgument,   // bad command-line or API argument
  kBusy,              // a shared session is in use by another thread (runtime/shared_session.h)
};

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const { return ok() ? "OK" : message_; }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

#define CFGMASK_RETURN_IF_ERROR(expr)        \
  do {                                       \
    ::cfgmask::Status _st = (expr);          \
    if (!_st.ok()) return _st;               \
  } while (0)

// A message as one line: newlines in text the engine quotes become spaces.
inline std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_BASE_STATUS_H_
