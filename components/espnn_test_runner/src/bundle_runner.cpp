// Bundle runner core (see espnn/bundle_runner.h): verify every output
// bit-exactly, then time, then verify again; one result line per case.
// Portable: no platform calls except through RunnerPlatform.
#include "espnn/bundle_runner.h"

#include <string.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"

namespace espnn {
namespace bundle {
namespace {

// Fixed-capacity line builder (no printf, no heap): result lines must be
// produced identically by every platform's libc, including small ones.
class Line {
 public:
  static constexpr uint32_t kCapacity = 512;

  Line& Str(const char* s) { return Raw(s, (uint32_t)strlen(s)); }
  Line& Raw(const char* s, uint32_t n) {
    for (uint32_t i = 0; i < n && len_ + 1 < kCapacity; ++i) buf_[len_++] = s[i];
    buf_[len_] = '\0';
    return *this;
  }
  Line& U64(uint64_t v) {
    char digits[20];
    uint32_t n = 0;
    do {
      digits[n++] = (char)('0' + (uint32_t)(v % 10u));
      v /= 10u;
    } while (v != 0);
    while (n > 0) Raw(&digits[--n], 1);
    return *this;
  }
  Line& Kv(const char* key, uint64_t v) { return Str(" ").Str(key).Str("=").U64(v); }
  Line& KvStr(const char* key, const char* v) { return Str(" ").Str(key).Str("=").Str(v); }
  // Decimal with three fractional digits from a value in thousandths.
  Line& KvMilli(const char* key, uint64_t milli) {
    Str(" ").Str(key).Str("=").U64(milli / 1000u).Str(".");
    const uint32_t frac = (uint32_t)(milli % 1000u);
    const char d[3] = {(char)('0' + frac / 100u), (char)('0' + frac / 10u % 10u),
                       (char)('0' + frac % 10u)};
    return Raw(d, 3);
  }
  // A little-endian element of `n` bytes, shown as one hex number.
  Line& KvHex(const char* key, const uint8_t* bytes, uint32_t n) {
    static const char kHex[] = "0123456789abcdef";
    Str(" ").Str(key).Str("=0x");
    for (uint32_t i = n; i > 0; --i) {
      const char h[2] = {kHex[bytes[i - 1] >> 4], kHex[bytes[i - 1] & 0xF]};
      Raw(h, 2);
    }
    return *this;
  }
  const char* c_str() const { return buf_; }

 private:
  char buf_[kCapacity] = {};
  uint32_t len_ = 0;
};

Line CaseLine(const Case& c, const char* status) {
  Line l;
  l.Str("ESPNN_RESULT v=1 case=").Raw(c.name, c.name_size).KvStr("status", status);
  return l;
}

bool Fail(RunnerPlatform& pf, const Case& c, const char* stage, const Status& s) {
  Line l = CaseLine(c, "error");
  l.KvStr("stage", stage).Str(" msg=").Str(s.message());
  pf.WriteLine(l.c_str());
  return false;
}

// Memory the runner holds for one case; released in reverse order so that a
// pool-backed platform can reset.
struct CaseMemory {
  RunnerPlatform& pf;
  void* model = nullptr;
  void* arena = nullptr;
  void* scratch = nullptr;
  void* regions = nullptr;
  uint64_t bytes = 0;

  explicit CaseMemory(RunnerPlatform& p) : pf(p) {}
  ~CaseMemory() {
    if (regions) pf.Free(regions, MemoryUse::kRegions);
    if (scratch) pf.Free(scratch, MemoryUse::kScratch);
    if (arena) pf.Free(arena, MemoryUse::kArena);
    if (model) pf.Free(model, MemoryUse::kModelCopy);
  }
  void* Get(size_t n, MemoryUse use) {
    void* p = pf.Alloc(n, use);
    if (p != nullptr && (uintptr_t)p % xts3::kArenaAlignment != 0) {
      // A platform bug, but one that would make ESP32-S3 SIMD kernels fault:
      // refuse the block rather than run on it.
      pf.Free(p, use);
      return nullptr;
    }
    if (p != nullptr) bytes += n;
    return p;
  }
};

const char* UseName(MemoryUse use) {
  switch (use) {
    case MemoryUse::kArena:
      return "arena";
    case MemoryUse::kScratch:
      return "scratch";
    case MemoryUse::kModelCopy:
      return "model copy";
    case MemoryUse::kRegions:
      return "region data";
  }
  return "block";
}

// Arena inputs are copied; EXTERNAL inputs are bound to the case's bytes
// in place (BindInput checks their alignment).
Status CopyInputs(Interpreter& interp, const Case& c) {
  uint32_t off = 0;
  for (uint32_t i = 0; i < interp.num_inputs(); ++i) {
    const TensorInfo t = interp.input_info(i);
    if (t.flags & xts3::kTensorFlagExternal)
      ESPNN_RETURN_IF_ERROR(interp.BindInput(i, c.inputs + off, t.nbytes));
    else
      memcpy(interp.input_data(i), c.inputs + off, t.nbytes);
    off += t.nbytes;
  }
  return Status::Ok();
}

// Compares every output byte; on a difference writes the mismatch line.
bool OutputsMatch(RunnerPlatform& pf, Interpreter& interp, const Case& c, const char* stage) {
  uint32_t off = 0;
  for (uint32_t i = 0; i < interp.num_outputs(); ++i) {
    const TensorInfo t = interp.output_info(i);
    const uint8_t* got = (const uint8_t*)interp.output_data(i);
    const uint8_t* want = c.expected + off;
    off += t.nbytes;
    if (memcmp(got, want, t.nbytes) == 0) continue;
    const uint32_t esize = DTypeSize(t.dtype);
    const uint32_t elements = t.nbytes / esize;
    uint32_t first = elements, diffs = 0;
    for (uint32_t e = 0; e < elements; ++e) {
      if (memcmp(got + e * esize, want + e * esize, esize) != 0) {
        if (first == elements) first = e;
        ++diffs;
      }
    }
    Line l = CaseLine(c, "mismatch");
    l.KvStr("stage", stage).Kv("output", i).Kv("element", first);
    l.KvHex("got", got + first * esize, esize).KvHex("expected", want + first * esize, esize);
    l.Kv("diff_elements", diffs).Kv("of", elements);
    pf.WriteLine(l.c_str());
    return false;
  }
  return true;
}

struct Stats {
  uint64_t min = UINT64_MAX, max = 0, sum = 0;
  void Add(uint64_t v) {
    if (v < min) min = v;
    if (v > max) max = v;
    sum = sum > UINT64_MAX - v ? UINT64_MAX : sum + v;
  }
};

}  // namespace

bool RunCase(const Case& c, RunnerPlatform& pf, const RunnerOptions& options) {
  CaseMemory mem(pf);

  // 1. Place the model: ParseModel wants it 16-byte aligned. In place is the
  //    norm (flash mmap is page aligned); an embedded file has no alignment
  //    guarantee, so such a model is copied, and the line says so.
  const uint8_t* model_bytes = c.model;
  const char* weights = "inplace";
  const bool aligned = (uintptr_t)c.model % xts3::kBlobAlignment == 0;
  if (options.weights == WeightPlacement::kCopy || !aligned) {
    weights = options.weights == WeightPlacement::kCopy ? "copy" : "copy-align";
    mem.model = mem.Get(c.model_size, MemoryUse::kModelCopy);
    if (mem.model == nullptr)
      return Fail(pf, c, "place",
                  Status::Error(StatusCode::kInvalidArgument,
                                "cannot allocate %u bytes for the model copy",
                                (unsigned)c.model_size));
    memcpy(mem.model, c.model, c.model_size);
    model_bytes = (const uint8_t*)mem.model;
  }

  // 2. Parse and size.
  Model model;
  Status s = ParseModel(model_bytes, c.model_size, &model);
  if (!s.ok()) return Fail(pf, c, "parse", s);
  const MemoryRequirements req = ComputeMemoryRequirements(model);
  const struct {
    uint32_t bytes;
    MemoryUse use;
    void** slot;
  } blocks[] = {{req.arena_bytes, MemoryUse::kArena, &mem.arena},
                {req.scratch_bytes, MemoryUse::kScratch, &mem.scratch},
                {req.persistent_bytes, MemoryUse::kRegions, &mem.regions}};
  for (const auto& b : blocks) {
    if (b.bytes == 0) continue;
    *b.slot = mem.Get(b.bytes, b.use);
    if (*b.slot == nullptr)
      return Fail(pf, c, "alloc",
                  Status::Error(StatusCode::kInvalidArgument,
                                "cannot allocate %u bytes for the %s (out of memory)",
                                (unsigned)b.bytes, UseName(b.use)));
  }
  Interpreter interp;
  s = interp.Init(&model, mem.arena, req.arena_bytes, mem.scratch, req.scratch_bytes, mem.regions,
                  req.persistent_bytes);
  if (!s.ok()) return Fail(pf, c, "init", s);

  // 3. The payloads must be exactly the graph's inputs and outputs.
  uint64_t in_bytes = 0, out_bytes = 0;
  for (uint32_t i = 0; i < interp.num_inputs(); ++i) in_bytes += interp.input_info(i).nbytes;
  for (uint32_t i = 0; i < interp.num_outputs(); ++i) out_bytes += interp.output_info(i).nbytes;
  if (c.inputs_size != in_bytes)
    return Fail(pf, c, "inputs",
                Status::Error(StatusCode::kInvalidArgument,
                              "%u input bytes in the bundle, the graph's %u inputs take %llu",
                              (unsigned)c.inputs_size, (unsigned)interp.num_inputs(),
                              (unsigned long long)in_bytes));
  if (c.expected_size != out_bytes)
    return Fail(pf, c, "expected",
                Status::Error(StatusCode::kInvalidArgument,
                              "%u expected bytes in the bundle, the graph's %u outputs take %llu",
                              (unsigned)c.expected_size, (unsigned)interp.num_outputs(),
                              (unsigned long long)out_bytes));

  // 4. Verify before timing: a wrong result is never reported with a speed.
  s = CopyInputs(interp, c);
  if (s.ok()) s = interp.Invoke();
  if (!s.ok()) return Fail(pf, c, "invoke", s);
  if (!OutputsMatch(pf, interp, c, "verify")) return false;

  // 5. Time N runs; inputs are restored before each (the arena plan may
  //    reuse an input's bytes), outside the measured interval.
  const uint32_t runs = c.runs != 0 ? c.runs : options.default_runs;
  const bool cycles = pf.has_cycles(), time = pf.has_time();
  const uint32_t hz = pf.cpu_hz();
  Stats cyc, us;
  for (uint32_t r = 0; r < runs; ++r) {
    CopyInputs(interp, c);  // cannot fail: the verify run bound the same bytes
    const uint64_t t0 = pf.TimeUs();
    const uint32_t c0 = pf.CycleCount();
    s = interp.Invoke();
    const uint32_t c1 = pf.CycleCount();
    const uint64_t t1 = pf.TimeUs();
    if (!s.ok()) return Fail(pf, c, "invoke", s);
    const uint64_t dt = t1 >= t0 ? t1 - t0 : 0;
    us.Add(dt);
    // The 32-bit counter wraps every 2^32 cycles; the microsecond clock
    // says how many times it did.
    cyc.Add(pal::UnwrapCycleDelta(c1 - c0, time && hz ? pal::MicrosToCycles(dt, hz) : 0));
    pf.Idle();
  }
  if (!OutputsMatch(pf, interp, c, "after-timing")) return false;

  Line l = CaseLine(c, "pass");
  l.Kv("runs", runs).Kv("ops", model.num_ops()).Kv("arena", req.arena_bytes);
  l.Kv("scratch", req.scratch_bytes).Kv("model_bytes", c.model_size).KvStr("weights", weights);
  l.Kv("alloc", mem.bytes);
  // Where the memory policy put each block (internal RAM first, PSRAM when
  // it does not fit, per the build's configuration), and the model bytes.
  if (mem.arena != nullptr) l.KvStr("arena_mem", pf.MemoryKind(mem.arena));
  if (mem.scratch != nullptr) l.KvStr("scratch_mem", pf.MemoryKind(mem.scratch));
  l.KvStr("model_mem", pf.MemoryKind(model_bytes));
  uint32_t heap_min = 0;
  if (pf.HeapMinFree(&heap_min))
    l.Kv("heap_free_min", heap_min);
  else
    l.KvStr("heap_free_min", "na");
  if (cycles && runs > 0)
    l.Kv("cycles_min", cyc.min).Kv("cycles_mean", cyc.sum / runs).Kv("cycles_max", cyc.max);
  else
    l.KvStr("cycles_min", "na").KvStr("cycles_mean", "na").KvStr("cycles_max", "na");
  if (time && runs > 0) {
    const uint64_t milli = us.sum > UINT64_MAX / 1000u ? UINT64_MAX : us.sum * 1000u;
    l.Kv("us_min", us.min).KvMilli("us_mean", milli / runs).Kv("us_max", us.max);
  } else {
    l.KvStr("us_min", "na").KvStr("us_mean", "na").KvStr("us_max", "na");
  }
  pf.WriteLine(l.c_str());
  return true;
}

RunSummary RunBundle(const void* data, size_t size, RunnerPlatform& pf,
                     const RunnerOptions& options) {
  RunSummary sum;
  Bundle b;
  const Status s = ParseBundle(data, size, &b);
  if (!s.ok()) {
    Line l;
    l.Str("ESPNN_BUNDLE_ERROR v=1 msg=").Str(s.message());
    pf.WriteLine(l.c_str());
    sum.failed = 1;
  } else {
    sum.bundle_ok = true;
    sum.cases = b.num_cases();
    Line begin;
    begin.Str("ESPNN_BEGIN v=1").KvStr("platform", pf.name()).Kv("cpu_hz", pf.cpu_hz());
    begin.Kv("cases", b.num_cases()).Kv("bundle_bytes", b.size());
    pf.WriteLine(begin.c_str());
    for (uint32_t i = 0; i < b.num_cases(); ++i) {
      if (RunCase(b.case_at(i), pf, options))
        ++sum.passed;
      else
        ++sum.failed;
      pf.Idle();
    }
  }
  Line end;
  end.Str("ESPNN_END v=1").Kv("cases", sum.cases).Kv("passed", sum.passed).Kv("failed", sum.failed);
  pf.WriteLine(end.c_str());
  return sum;
}

}  // namespace bundle
}  // namespace espnn
