// The result lines of the board runner, one rule for both modes (bundle
// mode, espnn/bundle_runner.h; .pte mode, espnn/pte_runner.h): how a line
// is built, how every record starts, and the fields both modes print the
// same way - error and mismatch records, the timing statistics of a passing
// case, the container rejection and the END record. The modes add their
// own fields (what a case ran on, how its program was placed) to these.
//
// Lines are built without printf and without the heap: the same bytes come
// out of every platform's libc, including small ones. (Messages inside
// msg= are composed by the code that detects the error, as Status messages
// are.) tools/device-evidence/collect.py, executorch_espnn.bundle's
// parse_result_line and the tests read these lines; their format is the
// one documented in bundle_runner.h and pte_runner.h.
#pragma once

#include <stdint.h>

#include "espnn/bundle_runner.h"  // RunnerPlatform, RunSummary: the platform both modes run on
#include "espnn/status.h"

namespace espnn {
namespace runner {

// Fixed-capacity line (truncated at kCapacity - 1 characters).
class ResultLine {
 public:
  static constexpr uint32_t kCapacity = 512;

  ResultLine& Str(const char* s);
  ResultLine& Raw(const char* s, uint32_t n);
  ResultLine& U64(uint64_t v);
  ResultLine& Kv(const char* key, uint64_t v);            // " key=123"
  ResultLine& KvStr(const char* key, const char* v);      // " key=text"
  ResultLine& KvMilli(const char* key, uint64_t milli);   // " key=1.234" from thousandths
  // " key=0x..." : the `bytes`-wide little-endian value `bits` as 2*bytes
  // hex digits (an element's raw bits, whatever its type).
  ResultLine& KvHex(const char* key, uint64_t bits, uint32_t bytes);
  const char* c_str() const { return buf_; }

 private:
  char buf_[kCapacity] = {};
  uint32_t len_ = 0;
};

// Minimum, maximum and (saturating) sum of the timed runs.
struct Stats {
  uint64_t min = UINT64_MAX, max = 0, sum = 0;
  void Add(uint64_t v);
};

// Cycle counter and microsecond clock around each timed run.
class RunTimer {
 public:
  explicit RunTimer(bundle::RunnerPlatform& pf);
  void Start();  // just before the measured call
  void Stop();   // just after it: adds one run to the statistics
  // heap_free_min, cycles_min/mean/max and us_min/mean/max of `runs` runs
  // ("na" for what the platform cannot measure).
  void AppendFields(ResultLine& l, uint32_t runs) const;

 private:
  bundle::RunnerPlatform& pf_;
  bool cycles_, time_;
  uint32_t hz_;
  uint64_t t0_ = 0;
  uint32_t c0_ = 0;
  Stats cyc_, us_;
};

// The records of one mode: `mode` is the value of the mode= field (nullptr
// in bundle mode, whose lines carry none), `container_error` the record
// kind that rejects the whole container ("BUNDLE_ERROR", "SUITE_ERROR").
class Report {
 public:
  Report(bundle::RunnerPlatform& pf, const char* mode, const char* container_error)
      : pf_(pf), mode_(mode), container_error_(container_error) {}

  // "ESPNN_<kind> v=1" (and " mode=<mode>").
  ResultLine Record(const char* kind) const;
  // "ESPNN_RESULT v=1 ... case=<name> status=<status>".
  ResultLine CaseRecord(const char* name, uint32_t name_size, const char* status) const;
  // The error record of a case: " stage=<stage> msg=<msg>". Returns false
  // (the case failed).
  bool CaseError(const char* name, uint32_t name_size, const char* stage, const char* msg) const;
  // The mismatch record: the first differing element of output `output`
  // (its raw bits, `width` bytes each) and how many of `elements` differ.
  void Mismatch(const char* name, uint32_t name_size, const char* stage, uint32_t output,
                uint32_t element, uint64_t got_bits, uint64_t want_bits, uint32_t width, uint32_t diffs,
                uint32_t elements) const;
  // Starts the session over a container whose parse gave `parsed`: true,
  // with `sum` expecting `cases` cases, if it parsed; else false after the
  // rejection records (see Rejected).
  bool Accept(const Status& parsed, uint32_t cases, bundle::RunSummary* sum) const;
  // The container did not parse: its error record, then an END record of
  // one failure; `sum` says so too.
  void Rejected(const char* msg, bundle::RunSummary* sum) const;
  // "ESPNN_BEGIN v=1 ... platform=<name>"; the mode adds what it runs.
  ResultLine Begin() const;
  void End(const bundle::RunSummary& sum) const;
  void Write(const ResultLine& l) const { pf_.WriteLine(l.c_str()); }

 private:
  bundle::RunnerPlatform& pf_;
  const char* mode_;
  const char* container_error_;
};

// The two modes: bundle-mode records carry no mode= field and a rejected
// bundle is an ESPNN_BUNDLE_ERROR; .pte-mode records carry mode=pte and a
// rejected suite is an ESPNN_SUITE_ERROR. (main/ reports a test file it
// cannot find or map with the same records.)
Report BundleModeReport(bundle::RunnerPlatform& pf);
Report PteModeReport(bundle::RunnerPlatform& pf);

}  // namespace runner
}  // namespace espnn
