// Test support shared by the native ExecuTorch delegate checks (host/tools/
// et_*_check.cpp) and the glue fuzz target (host/fuzz/fuzz_et_glue.cpp).
//
//   * ProbeTracer: an EventTracer that allocates nothing and reports when
//     ExecuTorch enters and leaves a delegate call ("DELEGATE_CALL" events of
//     Method::execute) — the window in which EspNNBackend::execute runs.
//   * OwnedTensor: a TensorImpl over caller-owned storage with an explicit
//     dim order (strides derived from it, or set one by one), for hand-made
//     delegate arguments.
#pragma once

#include <stdint.h>
#include <string.h>

#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

namespace espnn_test {

namespace etr = ::executorch::runtime;

class ProbeTracer final : public etr::EventTracer {
 public:
  using Hook = void (*)(void* ctx, bool entering);
  // `hook` runs on entry to and exit from every DELEGATE_CALL event.
  ProbeTracer(Hook hook, void* ctx) : hook_(hook), ctx_(ctx) {}

  // Negative control: allocate (and free) inside each per-op profiling event
  // the delegate emits, i.e. inside EspNNBackend::execute.
  void set_allocate_in_delegate(bool on) { allocate_in_delegate_ = on; }
  unsigned long delegate_events() const { return delegate_events_; }

  void create_event_block(const char*) override {}
  etr::EventTracerEntry start_profiling(const char* name, etr::ChainID chain_id,
                                        etr::DebugHandle debug_handle) override {
    etr::EventTracerEntry e{};
    e.chain_id = chain_id;
    e.debug_handle = debug_handle;
    e.event_id = name != nullptr && strcmp(name, "DELEGATE_CALL") == 0 ? kDelegateCall : 0;
    if (e.event_id == kDelegateCall && hook_ != nullptr) hook_(ctx_, true);
    return e;
  }
  void end_profiling(etr::EventTracerEntry e) override {
    if (e.event_id == kDelegateCall && hook_ != nullptr) hook_(ctx_, false);
  }
  etr::EventTracerEntry start_profiling_delegate(const char*, etr::DelegateDebugIntId) override {
    ++delegate_events_;
    if (allocate_in_delegate_) {
      void* volatile p = ::operator new(16);
      ::operator delete(p);
    }
    return etr::EventTracerEntry{};
  }
  void end_profiling_delegate(etr::EventTracerEntry, const void*, size_t) override {}
  void log_profiling_delegate(const char*, etr::DelegateDebugIntId, et_timestamp_t, et_timestamp_t,
                              const void*, size_t) override {}
  void track_allocation(etr::AllocatorID, size_t) override {}
  etr::AllocatorID track_allocator(const char*) override { return 0; }
  etr::Result<bool> log_evalue(const etr::EValue&, etr::LoggedEValueType) override { return false; }
  etr::Result<bool> log_intermediate_output_delegate(const char*, etr::DelegateDebugIntId,
                                                     const executorch::aten::Tensor&) override {
    return false;
  }
  etr::Result<bool> log_intermediate_output_delegate(
      const char*, etr::DelegateDebugIntId, const etr::ArrayRef<executorch::aten::Tensor>) override {
    return false;
  }
  etr::Result<bool> log_intermediate_output_delegate(const char*, etr::DelegateDebugIntId,
                                                     const int&) override {
    return false;
  }
  etr::Result<bool> log_intermediate_output_delegate(const char*, etr::DelegateDebugIntId,
                                                     const bool&) override {
    return false;
  }
  etr::Result<bool> log_intermediate_output_delegate(const char*, etr::DelegateDebugIntId,
                                                     const double&) override {
    return false;
  }
  void set_delegation_intermediate_output_filter(etr::EventTracerFilterBase*) override {}

 private:
  static constexpr int64_t kDelegateCall = 0x5E5E;
  Hook hook_;
  void* ctx_;
  bool allocate_in_delegate_ = false;
  unsigned long delegate_events_ = 0;
};

// A tensor argument built by hand: sizes and dim order are copied in, the
// strides follow the dim order (dim_order[rank-1] is the fastest-moving).
class OwnedTensor {
 public:
  static constexpr int kMaxRank = 16;
  OwnedTensor(executorch::aten::ScalarType type, int rank, const int32_t* sizes,
              const uint8_t* dim_order, void* data)
      : impl_(type, rank, Init(rank, sizes, dim_order), data, dim_order_, strides_),
        tensor_(&impl_) {}
  executorch::aten::Tensor& tensor() { return tensor_; }
  // Overrides one stride after construction (the TensorImpl reads this
  // array), for strides that do not follow the dim order.
  void SetStride(int dim, int32_t stride) { strides_[dim] = stride; }

 private:
  int32_t* Init(int rank, const int32_t* sizes, const uint8_t* dim_order) {
    int32_t stride = 1;
    for (int i = 0; i < rank; ++i) {
      sizes_[i] = sizes[i];
      dim_order_[i] = dim_order[i];
    }
    for (int i = rank - 1; i >= 0; --i) {
      strides_[dim_order_[i]] = stride;
      stride *= sizes_[dim_order_[i]];
    }
    return sizes_;
  }
  int32_t sizes_[kMaxRank] = {};
  uint8_t dim_order_[kMaxRank] = {};
  int32_t strides_[kMaxRank] = {};
  executorch::runtime::etensor::TensorImpl impl_;
  executorch::aten::Tensor tensor_;
};

}  // namespace espnn_test
