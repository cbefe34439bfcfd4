// .pte mode of the board runner (see pte_runner.h): ExecuTorch's runtime
// runs each case of an XTSP suite; verify first, then time, then verify
// again. The suite container is parsed by pte_suite.cpp; everything here is
// ExecuTorch's public C++ API plus the platform's allocator, clocks and
// console (espnn::bundle::RunnerPlatform).
#include "espnn/pte_runner.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <new>

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include "espnn/pte_check.h"
#include "espnn/pte_suite.h"
#include "espnn/result_line.h"

namespace espnn {
namespace pte {
namespace {

using bundle::MemoryUse;
using bundle::RunnerPlatform;
using bundle::RunSummary;
using executorch::aten::ScalarType;
using executorch::aten::TensorImpl;
using executorch::runtime::DataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;

using runner::Report;
using runner::ResultLine;

// A DataLoader over a program that is already addressable (flash mmap,
// .rodata, RAM): segments are pointers into it, nothing is copied or freed.
class InPlaceLoader final : public DataLoader {
 public:
  InPlaceLoader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  Result<FreeableBuffer> load(size_t offset, size_t size, const SegmentInfo&) const override {
    if (offset > size_ || size > size_ - offset) return Error::InvalidArgument;
    return FreeableBuffer(data_ + offset, size, static_cast<FreeableBuffer::FreeFn>(nullptr));
  }
  Result<size_t> size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

constexpr uint32_t kMaxPlannedBuffers = 8;

// Blocks from the platform, freed in reverse order when the owner goes
// away (a pool-backed platform resets when its last block is freed).
class Blocks {
 public:
  // Planned buffers + method pool + temp pool + an aligned program copy.
  static constexpr int kMax = kMaxPlannedBuffers + 3;
  explicit Blocks(RunnerPlatform& pf) : pf_(pf) {}
  ~Blocks() {
    while (n_ > 0) {
      --n_;
      pf_.Free(ptr_[n_], use_[n_]);
    }
  }
  uint8_t* Get(size_t bytes, MemoryUse use) {
    if (n_ == kMax) return nullptr;
    void* p = pf_.Alloc(bytes ? bytes : 1, use);
    if (p == nullptr) return nullptr;
    ptr_[n_] = p;
    use_[n_++] = use;
    total_ += bytes;
    return (uint8_t*)p;
  }
  uint64_t total() const { return total_; }

 private:
  RunnerPlatform& pf_;
  void* ptr_[kMax] = {};
  MemoryUse use_[kMax] = {};
  int n_ = 0;
  uint64_t total_ = 0;
};

// One case's input tensors: TensorImpls over the suite's bytes (ExecuTorch
// copies them into the method's planned input memory in set_input).
struct InputTensors {
  TensorImpl::SizesType sizes[kMaxTensors][kMaxRank];
  TensorImpl::DimOrderType dim_order[kMaxTensors][kMaxRank];
  TensorImpl::StridesType strides[kMaxTensors][kMaxRank];
  alignas(TensorImpl) uint8_t impl_storage[kMaxTensors][sizeof(TensorImpl)];
  uint32_t count = 0;
  TensorImpl* impl(uint32_t i) { return reinterpret_cast<TensorImpl*>(impl_storage[i]); }
};

class CaseRun {
 public:
  CaseRun(const Suite& suite, const Case& c, RunnerPlatform& pf)
      : suite_(suite), c_(c), report_(runner::PteModeReport(pf)) {}

  // The error record; the message is composed as a Status message is.
  bool Fail(const char* stage, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return report_.CaseError(c_.name, c_.name_size, stage, msg);
  }

  ResultLine Head(const char* status) const { return report_.CaseRecord(c_.name, c_.name_size, status); }

  // Checks the suite's inputs against the method's and builds the tensors.
  bool PrepareInputs(const MethodMeta& meta, InputTensors* in) {
    if (meta.num_inputs() != c_.input_count)
      return Fail("inputs", "the method takes %u inputs, the case has %u", (unsigned)meta.num_inputs(),
                  (unsigned)c_.input_count);
    for (uint32_t i = 0; i < c_.input_count; ++i) {
      const Tensor t = suite_.input(c_, i);
      Result<executorch::runtime::TensorInfo> info = meta.input_tensor_meta(i);
      if (!info.ok()) return Fail("inputs", "input %u is not a tensor", (unsigned)i);
      if ((uint32_t)info->scalar_type() != t.dtype)
        return Fail("inputs", "input %u: the method wants ScalarType %d, the case has %s",
                    (unsigned)i, (int)info->scalar_type(), DtypeName(t.dtype));
      const Span<const int32_t> sizes = info->sizes();
      bool same = sizes.size() == t.rank;
      for (uint32_t d = 0; same && d < t.rank; ++d) same = (uint32_t)sizes[d] == t.dims[d];
      if (!same) return Fail("inputs", "input %u: shape differs from the method's", (unsigned)i);
      const Span<const uint8_t> order = info->dim_order();
      // Strides from the dim order: the innermost dimension in memory is 1.
      int64_t stride = 1;
      for (int k = (int)t.rank - 1; k >= 0; --k) {
        const uint8_t d = order.size() == t.rank ? order[k] : (uint8_t)k;
        if (d >= t.rank) return Fail("inputs", "input %u: invalid dim order", (unsigned)i);
        in->strides[i][d] = (TensorImpl::StridesType)stride;
        stride *= (int64_t)t.dims[d];
      }
      for (uint32_t d = 0; d < t.rank; ++d) {
        in->sizes[i][d] = (TensorImpl::SizesType)t.dims[d];
        in->dim_order[i][d] = order.size() == t.rank ? order[d] : (uint8_t)d;
      }
      // The suite is read-only (flash); ExecuTorch copies planned inputs
      // out of it and never writes through an input it did not allocate.
      new (in->impl(i)) TensorImpl((ScalarType)t.dtype, (ssize_t)t.rank, in->sizes[i],
                                   const_cast<uint8_t*>(t.data), in->dim_order[i], in->strides[i]);
      in->count = i + 1;
    }
    return true;
  }

  bool SetInputs(Method& method, InputTensors& in) {
    for (uint32_t i = 0; i < in.count; ++i) {
      const Error e = method.set_input(EValue(executorch::aten::Tensor(in.impl(i))), i);
      if (e != Error::Ok)
        return Fail("inputs", "set_input(%u) failed: %s", (unsigned)i,
                    executorch::runtime::to_string(e));
    }
    return true;
  }

  bool Execute(Method& method) {
    const Error e = method.execute();
    if (e != Error::Ok)
      return Fail("execute", "Method::execute failed: %s (0x%x)", executorch::runtime::to_string(e),
                  (unsigned)e);
    return true;
  }

  bool OutputsMatch(Method& method, const char* stage) {
    if (method.outputs_size() != c_.output_count)
      return Fail("outputs", "the method returned %u outputs, the suite expects %u",
                  (unsigned)method.outputs_size(), (unsigned)c_.output_count);
    for (uint32_t i = 0; i < c_.output_count; ++i) {
      const Tensor want = suite_.output(c_, i);
      const EValue& v = method.get_output(i);
      if (!v.isTensor()) return Fail("outputs", "output %u is not a tensor", (unsigned)i);
      const executorch::aten::Tensor& got = v.toTensor();
      bool same = (uint32_t)got.scalar_type() == want.dtype && (uint32_t)got.dim() == want.rank &&
                  got.nbytes() == want.size;
      for (uint32_t d = 0; same && d < want.rank; ++d) same = (uint32_t)got.size(d) == want.dims[d];
      if (!same)
        return Fail("outputs", "output %u is ScalarType %d of rank %d, the suite expects %s of rank %u",
                    (unsigned)i, (int)got.scalar_type(), (int)got.dim(), DtypeName(want.dtype),
                    (unsigned)want.rank);
      const Comparison cmp = CompareOutput(want, got.const_data_ptr());
      if (cmp.diff == 0) continue;
      report_.Mismatch(c_.name, c_.name_size, stage, i, cmp.first, cmp.got_bits, cmp.want_bits,
                       want.dtype_size(), cmp.diff, want.elements());
      return false;
    }
    return true;
  }

 private:
  const Suite& suite_;
  const Case& c_;
  const Report report_;
};

bool AnyTolerance(const Suite& s, const Case& c) {
  for (uint32_t i = 0; i < c.output_count; ++i)
    if (s.output(c, i).atol > 0.0f) return true;
  return false;
}

// Steps 4-6 for one case whose method is loaded and inputs prepared.
bool RunTimed(const Suite& suite, const Case& c, CaseRun& run, Method& method, InputTensors& inputs,
              RunnerPlatform& pf, const PteRunnerOptions& options, const char* placement,
              uint64_t planned_bytes, size_t method_pool_used) {
  // Verify before timing: a wrong result is never reported with a speed.
  if (!run.SetInputs(method, inputs) || !run.Execute(method)) return false;
  if (!run.OutputsMatch(method, "verify")) return false;

  // Time N runs; inputs are set again before each (the memory plan may
  // reuse an input's bytes), outside the measured interval.
  const uint32_t runs = c.runs != 0 ? c.runs : options.default_runs;
  runner::RunTimer timer(pf);
  for (uint32_t r = 0; r < runs; ++r) {
    if (!run.SetInputs(method, inputs)) return false;
    timer.Start();
    const Error e = method.execute();
    timer.Stop();
    if (e != Error::Ok)
      return run.Fail("execute", "Method::execute failed in timed run %u: %s", (unsigned)r,
                      executorch::runtime::to_string(e));
    pf.Idle();
  }
  if (!run.OutputsMatch(method, "after-timing")) return false;

  ResultLine l = run.Head("pass");
  l.Kv("runs", runs).Kv("inputs", c.input_count).Kv("outputs", c.output_count);
  l.KvStr("tolerance", AnyTolerance(suite, c) ? "atol" : "exact").KvStr("program", placement);
  l.Kv("planned", planned_bytes).Kv("method_pool", method_pool_used);
  timer.AppendFields(l, runs);
  pf.WriteLine(l.c_str());
  return true;
}

// A negative case: inputs set, one execute(), which must return
// InvalidArgument (the program refusing what it cannot read). Not timed.
bool ExpectRefusal(const Case& c, CaseRun& run, Method& method, InputTensors& inputs, RunnerPlatform& pf) {
  if (!run.SetInputs(method, inputs)) return false;
  const Error e = method.execute();
  if (e != Error::InvalidArgument)
    return run.Fail("execute", "expected Method::execute to refuse the inputs (InvalidArgument), got %s (0x%x)",
                    executorch::runtime::to_string(e), (unsigned)e);
  ResultLine l = run.Head("pass");
  l.Kv("runs", 0).Kv("inputs", c.input_count).Kv("outputs", 0).KvStr("refused", "InvalidArgument");
  pf.WriteLine(l.c_str());
  return true;
}

}  // namespace

RunSummary RunSuite(const void* data, size_t size, RunnerPlatform& pf, const PteRunnerOptions& options) {
  const Report report = runner::PteModeReport(pf);
  RunSummary sum;
  Suite suite;
  const Status parsed = ParseSuite(data, size, &suite);
  if (!report.Accept(parsed, suite.num_cases(), &sum)) return sum;
  executorch::runtime::runtime_init();
  {
    ResultLine l = report.Begin();
    if (pf.cpu_hz()) l.Kv("cpu_hz", pf.cpu_hz());
    else l.KvStr("cpu_hz", "na");
    l.Kv("cases", suite.num_cases()).Kv("suite_bytes", suite.size()).Kv("pte_bytes", suite.pte_size());
    l.KvStr("method", suite.method());
    report.Write(l);
  }

  Blocks suite_mem(pf);
  // 1. Place the program. In place when it is kPteAlignment-aligned (a
  //    flash mmap is page aligned and the suite puts the .pte on a 128-byte
  //    boundary); an embedded suite has no alignment guarantee: copy it.
  const uint8_t* pte = suite.pte();
  const char* placement = "inplace";
  const char* setup_error = nullptr;
  char setup_msg[256] = {};
  if ((uintptr_t)pte % kPteAlignment != 0) {
    placement = "copy-align";
    uint8_t* raw = suite_mem.Get(suite.pte_size() + kPteAlignment, MemoryUse::kModelCopy);
    if (raw == nullptr) {
      snprintf(setup_msg, sizeof(setup_msg), "cannot allocate %u bytes to align the program",
               (unsigned)suite.pte_size());
      setup_error = "load";
    } else {
      uint8_t* aligned = raw + (kPteAlignment - (uintptr_t)raw % kPteAlignment) % kPteAlignment;
      memcpy(aligned, pte, suite.pte_size());
      pte = aligned;
    }
  }
  // The program is checked twice before ExecuTorch uses it: by the
  // component's check of what ExecuTorch 1.5.1's loader reads unchecked
  // (espnn/pte_check.h: a delegate entry without its processed data would
  // be a null dereference in load_method), then by ExecuTorch's own full
  // verification (the flatbuffers Verifier: every offset, vector and
  // string inside the program).
  const Status checked = setup_error ? Status::Ok() : CheckProgram(pte, suite.pte_size());
  if (!checked.ok()) {
    snprintf(setup_msg, sizeof(setup_msg), "the program fails the check: %s", checked.message());
    setup_error = "load";
  }
  InPlaceLoader loader(pte, suite.pte_size());
  Result<Program> program = setup_error ? Result<Program>(Error::InvalidProgram)  // (message set above)
                                        : Program::load(&loader, Program::Verification::InternalConsistency);
  Result<MethodMeta> meta = program.ok() ? program->method_meta(suite.method()) : Result<MethodMeta>(program.error());

  // 2. Memory for the method, shared by all cases: planned buffers (the
  //    AOT memory plan), the method allocator pool and the temp pool.
  uint8_t* method_pool = suite_mem.Get(options.method_pool_bytes, MemoryUse::kScratch);
  uint8_t* temp_pool = suite_mem.Get(options.temp_pool_bytes, MemoryUse::kScratch);
  Span<uint8_t> planned_spans[kMaxPlannedBuffers];
  uint64_t planned_bytes = 0;
  if (setup_error != nullptr) {
    // (message set above)
  } else if (!program.ok()) {
    snprintf(setup_msg, sizeof(setup_msg), "Program::load failed: %s",
             executorch::runtime::to_string(program.error()));
    setup_error = "load";
  } else if (!meta.ok()) {
    snprintf(setup_msg, sizeof(setup_msg), "the program has no method '%s'", suite.method());
    setup_error = "method";
  } else if (method_pool == nullptr || temp_pool == nullptr) {
    snprintf(setup_msg, sizeof(setup_msg), "cannot allocate the method pool (%u B) and temp pool (%u B)",
             (unsigned)options.method_pool_bytes, (unsigned)options.temp_pool_bytes);
    setup_error = "method";
  } else if (meta->num_memory_planned_buffers() > kMaxPlannedBuffers) {
    snprintf(setup_msg, sizeof(setup_msg), "%u planned buffers, this runner handles %u",
             (unsigned)meta->num_memory_planned_buffers(), (unsigned)kMaxPlannedBuffers);
    setup_error = "method";
  } else {
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
      const int64_t n = meta->memory_planned_buffer_size(i).get();
      uint8_t* p = n > 0 ? suite_mem.Get((size_t)n, MemoryUse::kArena) : nullptr;
      if (n > 0 && p == nullptr) {
        snprintf(setup_msg, sizeof(setup_msg), "cannot allocate planned buffer %u (%lld bytes)",
                 (unsigned)i, (long long)n);
        setup_error = "method";
        break;
      }
      planned_spans[i] = Span<uint8_t>(p, (size_t)(n > 0 ? n : 0));
      planned_bytes += (uint64_t)(n > 0 ? n : 0);
    }
  }

  static InputTensors inputs;  // ~8 KB: static rather than on the task stack
  for (uint32_t ci = 0; ci < suite.num_cases(); ++ci) {
    const Case c = suite.case_at(ci);
    CaseRun run(suite, c, pf);
    bool ok = false;
    if (setup_error != nullptr) {
      run.Fail(setup_error, "%s", setup_msg);
    } else {
      MemoryAllocator method_alloc((uint32_t)options.method_pool_bytes, method_pool);
      MemoryAllocator temp_alloc((uint32_t)options.temp_pool_bytes, temp_pool);
      HierarchicalAllocator planned({planned_spans, meta->num_memory_planned_buffers()});
      MemoryManager mm(&method_alloc, &planned, &temp_alloc);
      Result<Method> method = program->load_method(suite.method(), &mm);
      if (!method.ok()) {
        run.Fail("method", "load_method('%s') failed: %s (method pool %u B)", suite.method(),
                 executorch::runtime::to_string(method.error()), (unsigned)options.method_pool_bytes);
      } else if (run.PrepareInputs(*meta, &inputs)) {
        ok = (c.flags & kCaseFlagExpectInvalidArgument)
                 ? ExpectRefusal(c, run, *method, inputs, pf)
                 : RunTimed(suite, c, run, *method, inputs, pf, options, placement, planned_bytes,
                            method_alloc.used_size());
      }
    }
    if (ok) ++sum.passed;
    else ++sum.failed;
    pf.Idle();
  }
  report.End(sum);
  return sum;
}

}  // namespace pte
}  // namespace espnn
