// The result-line rule both runner modes share (espnn/result_line.h).
#include "espnn/result_line.h"

#include <string.h>

#include "espnn/platform.h"

namespace espnn {
namespace runner {

ResultLine& ResultLine::Str(const char* s) { return Raw(s, (uint32_t)strlen(s)); }

ResultLine& ResultLine::Raw(const char* s, uint32_t n) {
  for (uint32_t i = 0; i < n && len_ + 1 < kCapacity; ++i) buf_[len_++] = s[i];
  buf_[len_] = '\0';
  return *this;
}

ResultLine& ResultLine::U64(uint64_t v) {
  char digits[20];
  uint32_t n = 0;
  do {
    digits[n++] = (char)('0' + (uint32_t)(v % 10u));
    v /= 10u;
  } while (v != 0);
  while (n > 0) Raw(&digits[--n], 1);
  return *this;
}

ResultLine& ResultLine::Kv(const char* key, uint64_t v) { return Str(" ").Str(key).Str("=").U64(v); }

ResultLine& ResultLine::KvStr(const char* key, const char* v) { return Str(" ").Str(key).Str("=").Str(v); }

ResultLine& ResultLine::KvMilli(const char* key, uint64_t milli) {
  Str(" ").Str(key).Str("=").U64(milli / 1000u).Str(".");
  const uint32_t frac = (uint32_t)(milli % 1000u);
  const char d[3] = {(char)('0' + frac / 100u), (char)('0' + frac / 10u % 10u), (char)('0' + frac % 10u)};
  return Raw(d, 3);
}

ResultLine& ResultLine::KvHex(const char* key, uint64_t bits, uint32_t bytes) {
  static const char kHex[] = "0123456789abcdef";
  Str(" ").Str(key).Str("=0x");
  for (uint32_t i = 2 * bytes; i > 0; --i) Raw(&kHex[(bits >> (4 * (i - 1))) & 0xFu], 1);
  return *this;
}

void Stats::Add(uint64_t v) {
  if (v < min) min = v;
  if (v > max) max = v;
  sum = sum > UINT64_MAX - v ? UINT64_MAX : sum + v;
}

RunTimer::RunTimer(bundle::RunnerPlatform& pf)
    : pf_(pf), cycles_(pf.has_cycles()), time_(pf.has_time()), hz_(pf.cpu_hz()) {}

void RunTimer::Start() {
  t0_ = pf_.TimeUs();
  c0_ = pf_.CycleCount();
}

void RunTimer::Stop() {
  const uint32_t c1 = pf_.CycleCount();
  const uint64_t t1 = pf_.TimeUs();
  const uint64_t dt = t1 >= t0_ ? t1 - t0_ : 0;
  us_.Add(dt);
  // The 32-bit counter wraps every 2^32 cycles; the microsecond clock says
  // how many times it did.
  cyc_.Add(pal::UnwrapCycleDelta(c1 - c0_, time_ && hz_ ? pal::MicrosToCycles(dt, hz_) : 0));
}

void RunTimer::AppendFields(ResultLine& l, uint32_t runs) const {
  uint32_t heap_min = 0;
  if (pf_.HeapMinFree(&heap_min))
    l.Kv("heap_free_min", heap_min);
  else
    l.KvStr("heap_free_min", "na");
  if (cycles_ && runs > 0)
    l.Kv("cycles_min", cyc_.min).Kv("cycles_mean", cyc_.sum / runs).Kv("cycles_max", cyc_.max);
  else
    l.KvStr("cycles_min", "na").KvStr("cycles_mean", "na").KvStr("cycles_max", "na");
  if (time_ && runs > 0) {
    const uint64_t milli = us_.sum > UINT64_MAX / 1000u ? UINT64_MAX : us_.sum * 1000u;
    l.Kv("us_min", us_.min).KvMilli("us_mean", milli / runs).Kv("us_max", us_.max);
  } else {
    l.KvStr("us_min", "na").KvStr("us_mean", "na").KvStr("us_max", "na");
  }
}

ResultLine Report::Record(const char* kind) const {
  ResultLine l;
  l.Str("ESPNN_").Str(kind).Str(" v=1");
  if (mode_ != nullptr) l.KvStr("mode", mode_);
  return l;
}

ResultLine Report::CaseRecord(const char* name, uint32_t name_size, const char* status) const {
  ResultLine l = Record("RESULT");
  l.Str(" case=").Raw(name, name_size).KvStr("status", status);
  return l;
}

bool Report::CaseError(const char* name, uint32_t name_size, const char* stage, const char* msg) const {
  ResultLine l = CaseRecord(name, name_size, "error");
  l.KvStr("stage", stage).KvStr("msg", msg);
  Write(l);
  return false;
}

void Report::Mismatch(const char* name, uint32_t name_size, const char* stage, uint32_t output,
                      uint32_t element, uint64_t got_bits, uint64_t want_bits, uint32_t width,
                      uint32_t diffs, uint32_t elements) const {
  ResultLine l = CaseRecord(name, name_size, "mismatch");
  l.KvStr("stage", stage).Kv("output", output).Kv("element", element);
  l.KvHex("got", got_bits, width).KvHex("expected", want_bits, width);
  l.Kv("diff_elements", diffs).Kv("of", elements);
  Write(l);
}

bool Report::Accept(const Status& parsed, uint32_t cases, bundle::RunSummary* sum) const {
  if (!parsed.ok()) {
    Rejected(parsed.message(), sum);
    return false;
  }
  *sum = bundle::RunSummary();
  sum->bundle_ok = true;
  sum->cases = cases;
  return true;
}

ResultLine Report::Begin() const {
  ResultLine l = Record("BEGIN");
  l.KvStr("platform", pf_.name());
  return l;
}

void Report::Rejected(const char* msg, bundle::RunSummary* sum) const {
  ResultLine l;
  l.Str("ESPNN_").Str(container_error_).Str(" v=1").KvStr("msg", msg);
  Write(l);
  *sum = bundle::RunSummary();
  sum->failed = 1;
  End(*sum);
}

void Report::End(const bundle::RunSummary& sum) const {
  ResultLine l = Record("END");
  l.Kv("cases", sum.cases).Kv("passed", sum.passed).Kv("failed", sum.failed);
  Write(l);
}

Report BundleModeReport(bundle::RunnerPlatform& pf) { return Report(pf, nullptr, "BUNDLE_ERROR"); }
Report PteModeReport(bundle::RunnerPlatform& pf) { return Report(pf, "pte", "SUITE_ERROR"); }

}  // namespace runner
}  // namespace espnn
