#include "espnn/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace espnn {

Status Status::Error(StatusCode code, const char* fmt, ...) {
  Status s;
  s.code_ = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s.message_, kMessageCapacity, fmt, ap);
  va_end(ap);
  return s;
}

Status& Status::Prefix(const char* fmt, ...) {
  char prefix[kMessageCapacity];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof(prefix), fmt, ap);
  va_end(ap);
  char joined[kMessageCapacity];
  snprintf(joined, sizeof(joined), "%s: %s", prefix, message_);
  memcpy(message_, joined, kMessageCapacity);
  return *this;
}

}  // namespace espnn
