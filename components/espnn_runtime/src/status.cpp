#include "espnn/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace espnn {

Status Status::Error(StatusCode code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Status s = ErrorV(code, fmt, ap);
  va_end(ap);
  return s;
}

Status Status::ErrorV(StatusCode code, const char* fmt, va_list ap) {
  Status s;
  s.code_ = code;
  vsnprintf(s.message_, kMessageCapacity, fmt, ap);
  return s;
}

Status& Status::Prefix(const char* fmt, ...) {
  char joined[kMessageCapacity];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(joined, sizeof(joined), fmt, ap);
  va_end(ap);
  // Append ": " and the old message after the prefix; both are truncated to
  // the fixed capacity on purpose (checking the return values tells the
  // compiler so, which keeps -Wformat-truncation quiet).
  size_t used = n < 0 ? 0 : (size_t)n;
  if (used > sizeof(joined) - 1) used = sizeof(joined) - 1;
  if (snprintf(joined + used, sizeof(joined) - used, ": %s", message_) < 0) joined[used] = '\0';
  memcpy(message_, joined, kMessageCapacity);
  return *this;
}

}  // namespace espnn
