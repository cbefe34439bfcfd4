// Bundle runner core (see espnn/bundle_runner.h): verify every output
// bit-exactly, then time, then verify again; one result line per case.
// Portable: no platform calls except through RunnerPlatform.
#include "espnn/bundle_runner.h"

#include <string.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "espnn/result_line.h"

namespace espnn {
namespace bundle {
namespace {

using runner::Report;
using runner::ResultLine;

bool Fail(RunnerPlatform& pf, const Case& c, const char* stage, const Status& s) {
  return runner::BundleModeReport(pf).CaseError(c.name, c.name_size, stage, s.message());
}

// An element's raw bits (little-endian, at most 8 bytes) for the mismatch record.
uint64_t ElementBits(const uint8_t* p, uint32_t width) {
  uint64_t v = 0;
  for (uint32_t b = 0; b < width && b < 8; ++b) v |= (uint64_t)p[b] << (8 * b);
  return v;
}

// Memory the runner holds for one case; released in reverse order so that a
// pool-backed platform can reset.
struct CaseMemory {
  RunnerPlatform& pf;
  void* model = nullptr;
  void* arena = nullptr;
  void* scratch = nullptr;
  void* regions = nullptr;
  void* outputs = nullptr;  // the EXTERNAL graph outputs (activation memory, like the arena)
  uint64_t bytes = 0;

  explicit CaseMemory(RunnerPlatform& p) : pf(p) {}
  ~CaseMemory() {
    if (outputs) pf.Free(outputs, MemoryUse::kArena);
    if (regions) pf.Free(regions, MemoryUse::kRegions);
    if (scratch) pf.Free(scratch, MemoryUse::kScratch);
    if (arena) pf.Free(arena, MemoryUse::kArena);
    if (model) pf.Free(model, MemoryUse::kModelCopy);
  }
  void** Slot(MemoryUse use) {
    switch (use) {
      case MemoryUse::kArena:
        return &arena;
      case MemoryUse::kScratch:
        return &scratch;
      case MemoryUse::kRegions:
        return &regions;
      case MemoryUse::kModelCopy:
        break;
    }
    return &model;
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

// EXTERNAL outputs are written where the caller says: one block holds them
// all (each at a 16-byte aligned offset), bound once for every Invoke. It is
// the application's result memory, not what the model requires
// (MemoryRequirements), so it is not counted in the line's `alloc`.
Status BindOutputs(Interpreter& interp, CaseMemory& mem) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < interp.num_outputs(); ++i)
    if (interp.output_info(i).flags & xts3::kTensorFlagExternal)
      total += (interp.output_info(i).nbytes + 15u) & ~15u;
  if (total == 0) return Status::Ok();
  const uint64_t counted = mem.bytes;
  mem.outputs = mem.Get((size_t)total, MemoryUse::kArena);
  mem.bytes = counted;
  if (mem.outputs == nullptr)
    return Status::Error(StatusCode::kInvalidArgument,
                         "cannot allocate %llu bytes for the outputs (out of memory)",
                         (unsigned long long)total);
  uint8_t* at = (uint8_t*)mem.outputs;
  for (uint32_t i = 0; i < interp.num_outputs(); ++i) {
    const TensorInfo t = interp.output_info(i);
    if ((t.flags & xts3::kTensorFlagExternal) == 0) continue;
    ESPNN_RETURN_IF_ERROR(interp.BindOutput(i, at, t.nbytes));
    at += (t.nbytes + 15u) & ~15u;
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
    runner::BundleModeReport(pf).Mismatch(c.name, c.name_size, stage, i, first,
                                          ElementBits(got + first * esize, esize),
                                          ElementBits(want + first * esize, esize), esize, diffs,
                                          elements);
    return false;
  }
  return true;
}

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
  // In the order PredictPlacement assumes (espnn/placement.h): the
  // compile report's placement on an ESP32-S3 follows this loop.
  for (const MemoryUse use : kAllocationOrder) {
    const uint32_t bytes = RequiredBytes(req, use);
    if (bytes == 0) continue;
    void** slot = mem.Slot(use);
    *slot = mem.Get(bytes, use);
    if (*slot == nullptr)
      return Fail(pf, c, "alloc",
                  Status::Error(StatusCode::kInvalidArgument,
                                "cannot allocate %u bytes for the %s (out of memory)",
                                (unsigned)bytes, UseName(use)));
  }
  Interpreter interp;
  s = interp.Init(&model, mem.arena, req.arena_bytes, mem.scratch, req.scratch_bytes, mem.regions,
                  req.persistent_bytes);
  if (!s.ok()) return Fail(pf, c, "init", s);
  s = BindOutputs(interp, mem);
  if (!s.ok()) return Fail(pf, c, "alloc", s);

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
  runner::RunTimer timer(pf);
  for (uint32_t r = 0; r < runs; ++r) {
    CopyInputs(interp, c);  // cannot fail: the verify run bound the same bytes
    timer.Start();
    s = interp.Invoke();
    timer.Stop();
    if (!s.ok()) return Fail(pf, c, "invoke", s);
    pf.Idle();
  }
  if (!OutputsMatch(pf, interp, c, "after-timing")) return false;

  const Report report = runner::BundleModeReport(pf);
  ResultLine l = report.CaseRecord(c.name, c.name_size, "pass");
  l.Kv("runs", runs).Kv("ops", model.num_ops()).Kv("arena", req.arena_bytes);
  l.Kv("scratch", req.scratch_bytes).Kv("model_bytes", c.model_size).KvStr("weights", weights);
  l.Kv("alloc", mem.bytes);
  // Where the memory policy put each block (internal RAM first, PSRAM when
  // it does not fit, per the build's configuration), and the model bytes.
  if (mem.arena != nullptr) l.KvStr("arena_mem", pf.MemoryKind(mem.arena));
  if (mem.scratch != nullptr) l.KvStr("scratch_mem", pf.MemoryKind(mem.scratch));
  l.KvStr("model_mem", pf.MemoryKind(model_bytes));
  timer.AppendFields(l, runs);
  report.Write(l);
  return true;
}

RunSummary RunBundle(const void* data, size_t size, RunnerPlatform& pf,
                     const RunnerOptions& options) {
  const Report report = runner::BundleModeReport(pf);
  RunSummary sum;
  Bundle b;
  const Status parsed = ParseBundle(data, size, &b);
  if (!report.Accept(parsed, b.num_cases(), &sum)) return sum;
  ResultLine begin = report.Begin();
  begin.Kv("cpu_hz", pf.cpu_hz());
  begin.Kv("cases", b.num_cases()).Kv("bundle_bytes", b.size());
  report.Write(begin);
  for (uint32_t i = 0; i < b.num_cases(); ++i) {
    if (RunCase(b.case_at(i), pf, options))
      ++sum.passed;
    else
      ++sum.failed;
    pf.Idle();
  }
  report.End(sum);
  return sum;
}

}  // namespace bundle
}  // namespace espnn
