// Result of a runtime call: ok, or an error with a message that says what
// failed and where (op index, tensor index, field). No exceptions, no heap:
// the message lives in a fixed buffer inside the Status.
#pragma once

#include <stdarg.h>
#include <stddef.h>

namespace espnn {

enum class StatusCode : int {
  kOk = 0,
  kInvalidBlob = 1,        // the bytes are not a valid XTS3 blob
  kUnsupportedVersion = 2, // valid magic, but a format version we do not read
  kInvalidArgument = 3,    // a caller error (buffer too small, bad index, ...)
  kNotInitialized = 4,
  kOpNotCompiled = 5,      // a valid op that this build leaves out (selective build: ESPNN_OPS)
};

class Status {
 public:
  static constexpr size_t kMessageCapacity = 192;

  Status() : code_(StatusCode::kOk) { message_[0] = '\0'; }
  static Status Ok() { return Status(); }
  // printf-style message; truncated to kMessageCapacity - 1 characters.
  static Status Error(StatusCode code, const char* fmt, ...)
      __attribute__((format(printf, 2, 3)));
  // The same from a va_list, for printf-style helpers that fix the code.
  static Status ErrorV(StatusCode code, const char* fmt, va_list ap)
      __attribute__((format(printf, 2, 0)));

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const char* message() const { return message_; }

  // Prepends "context: " to the message (used to add "op 3 (CONV2D)").
  Status& Prefix(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

 private:
  StatusCode code_;
  char message_[kMessageCapacity];
};

}  // namespace espnn

// Propagates a non-ok Status to the caller.
#define ESPNN_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::espnn::Status espnn_status_ = (expr);    \
    if (!espnn_status_.ok()) return espnn_status_; \
  } while (0)
