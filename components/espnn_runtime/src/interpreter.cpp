#include "espnn/interpreter.h"

#include "ops/band_loop.h"
#include "ops/op_kernel.h"

namespace espnn {

using namespace xts3;

TensorInfo EvalContext::tensor(uint16_t index) const {
  TensorInfo t = model->tensor(index);
  if (const TensorView* v = view(index)) {
    t.dims[1] = v->rows;  // [1, rows, W, C]: the parser checked rank 4, batch 1
    t.nbytes = v->rows * t.dims[2] * t.dims[3];
  }
  return t;
}

namespace {

// The caller's buffer of EXTERNAL graph output tensor `index` (the parser
// lists each such tensor once among the outputs), nullptr if unbound.
uint8_t* ExternalOutput(const Model& model, void* const* bound, uint16_t index) {
  for (uint32_t i = 0; i < model.num_outputs(); ++i)
    if (model.output(i) == index) return bound ? (uint8_t*)bound[i] : nullptr;
  return nullptr;
}

}  // namespace

const uint8_t* EvalContext::in(uint16_t index) const {
  if (index == kNoTensor) return nullptr;
  if (const TensorView* v = view(index)) return v->data;
  if (model->caller_tensors()) return model->tensor_bytes(index);
  TensorInfo t = model->tensor(index);
  if ((t.flags & kTensorFlagExternal) != 0) {
    for (uint32_t i = 0; i < model->num_inputs(); ++i)
      if (model->input(i) == index) return external ? (const uint8_t*)external[i] : nullptr;
    // Else an EXTERNAL graph output (the parser allows no other), which a
    // later op may read too.
    return ExternalOutput(*model, external_out, index);
  }
  return t.memory == Memory::CONSTANT ? model->constant_data(t) : arena + t.offset;
}

uint8_t* EvalContext::out(uint16_t index) const {
  if (const TensorView* v = view(index)) return v->data;
  if (model->caller_tensors()) return model->tensor_bytes(index);
  const TensorInfo t = model->tensor(index);
  if ((t.flags & kTensorFlagExternal) != 0) return ExternalOutput(*model, external_out, index);
  return arena + t.offset;
}

MemoryRequirements ComputeMemoryRequirements(const Model& model) {
  MemoryRequirements r;
  // A program on caller tensors (ParseModel's tensor_data) has no arena.
  r.arena_bytes = model.caller_tensors() ? 0 : model.arena_size();
  uint32_t scratch = 0;
  for (uint32_t i = 0; i < model.num_ops(); ++i) {
    OpInfo op = model.op(i);
    const OpKernel* k = LookupOpKernel(op.opcode);
    if (k != nullptr && k->scratch_bytes != nullptr) {
      uint32_t s = k->scratch_bytes(model, op);
      if (s > scratch) scratch = s;
    }
  }
  // Round up so the buffer can be handed to SIMD code that works in 16-byte
  // chunks; saturate rather than wrap on absurd sizes.
  r.scratch_bytes = scratch > 0xFFFFFFF0u ? 0xFFFFFFF0u : (scratch + 15u) & ~15u;
  r.persistent_bytes = band::RegionsBytes(model);
  return r;
}

Status Interpreter::Init(const Model* model, void* arena, size_t arena_bytes, void* scratch,
                         size_t scratch_bytes, void* persistent, size_t persistent_bytes) {
  model_ = nullptr;
  regions_ = nullptr;
  num_regions_ = 0;
  if (model == nullptr || model->data() == nullptr)
    return Status::Error(StatusCode::kInvalidArgument, "init: model is not parsed");
  MemoryRequirements need = ComputeMemoryRequirements(*model);
  if (need.arena_bytes > 0 && (arena == nullptr || (uintptr_t)arena % kArenaAlignment != 0))
    return Status::Error(StatusCode::kInvalidArgument,
                         "init: arena must be non-null and %u-byte aligned",
                         (unsigned)kArenaAlignment);
  if (arena_bytes < need.arena_bytes)
    return Status::Error(StatusCode::kInvalidArgument,
                         "init: arena has %lu bytes, the model needs %u",
                         (unsigned long)arena_bytes, (unsigned)need.arena_bytes);
  if (need.scratch_bytes > 0 &&
      (scratch == nullptr || (uintptr_t)scratch % kArenaAlignment != 0))
    return Status::Error(StatusCode::kInvalidArgument,
                         "init: scratch must be non-null and %u-byte aligned",
                         (unsigned)kArenaAlignment);
  if (scratch_bytes < need.scratch_bytes)
    return Status::Error(StatusCode::kInvalidArgument,
                         "init: scratch has %lu bytes, the model needs %u",
                         (unsigned long)scratch_bytes, (unsigned)need.scratch_bytes);
  if (need.persistent_bytes > 0 &&
      (persistent == nullptr || (uintptr_t)persistent % band::kPersistentAlignment != 0))
    return Status::Error(StatusCode::kInvalidArgument,
                         "init: persistent memory must be non-null and %u-byte aligned",
                         (unsigned)band::kPersistentAlignment);
  if (persistent_bytes < need.persistent_bytes)
    return Status::Error(StatusCode::kInvalidArgument,
                         "init: persistent memory has %lu bytes, the model's fused regions need %u",
                         (unsigned long)persistent_bytes, (unsigned)need.persistent_bytes);
  ESPNN_RETURN_IF_ERROR(band::DescribeRegions(*model, persistent, need.persistent_bytes, &num_regions_));
  regions_ = persistent;
  model_ = model;
  for (uint32_t i = 0; i < kMaxGraphInputs; ++i) external_[i] = nullptr;
  for (uint32_t i = 0; i < kMaxGraphOutputs; ++i) external_out_[i] = nullptr;
  arena_ = (uint8_t*)arena;
  scratch_ = (uint8_t*)scratch;
  scratch_bytes_ = need.scratch_bytes;
  return Status::Ok();
}

void* Interpreter::input_data(uint32_t i) const {
  if (model_->caller_tensors()) return model_->tensor_bytes(model_->input(i));
  if ((input_info(i).flags & kTensorFlagExternal) != 0) return nullptr;
  return arena_ + input_info(i).offset;
}

namespace {

// The checks BindInput and BindOutput share: `what` is "input" or "output",
// `t` the tensor of graph input/output i (valid when i < count), `where`
// the accessor a non-EXTERNAL one is used through.
Status CheckBinding(const char* what, const char* where, uint32_t i, uint32_t count,
                    const TensorInfo& t, const void* data, size_t nbytes) {
  if (i >= count)
    return Status::Error(StatusCode::kInvalidArgument, "bind: %s %u of %u", what, (unsigned)i,
                         (unsigned)count);
  if ((t.flags & kTensorFlagExternal) == 0)
    return Status::Error(StatusCode::kInvalidArgument, "bind: %s %u is not EXTERNAL (use %s)", what,
                         (unsigned)i, where);
  const uint32_t align = DTypeSize(t.dtype);  // natural alignment of the element type
  if (data == nullptr || (uintptr_t)data % align != 0)
    return Status::Error(StatusCode::kInvalidArgument,
                         "bind: %s %u data must be non-null and %u-byte aligned", what, (unsigned)i,
                         (unsigned)align);
  if (nbytes != t.nbytes)
    return Status::Error(StatusCode::kInvalidArgument, "bind: %s %u has %lu bytes, expected %u", what,
                         (unsigned)i, (unsigned long)nbytes, (unsigned)t.nbytes);
  return Status::Ok();
}

}  // namespace

Status Interpreter::BindInput(uint32_t i, const void* data, size_t nbytes) {
  if (model_ == nullptr)
    return Status::Error(StatusCode::kNotInitialized, "bind before a successful init");
  const TensorInfo t = i < num_inputs() ? input_info(i) : TensorInfo{};
  ESPNN_RETURN_IF_ERROR(CheckBinding("input", "input_data", i, num_inputs(), t, data, nbytes));
  external_[i] = data;
  return Status::Ok();
}

Status Interpreter::BindOutput(uint32_t i, void* data, size_t nbytes) {
  if (model_ == nullptr)
    return Status::Error(StatusCode::kNotInitialized, "bind before a successful init");
  const TensorInfo t = i < num_outputs() ? output_info(i) : TensorInfo{};
  ESPNN_RETURN_IF_ERROR(CheckBinding("output", "output_data", i, num_outputs(), t, data, nbytes));
  external_out_[i] = data;
  return Status::Ok();
}

const void* Interpreter::output_data(uint32_t i) const {
  if (model_->caller_tensors()) return model_->tensor_bytes(model_->output(i));
  if ((output_info(i).flags & kTensorFlagExternal) != 0) return external_out_[i];
  return arena_ + output_info(i).offset;
}

Status Interpreter::CheckBound() const {
  for (uint32_t i = 0; i < num_inputs(); ++i)
    if ((input_info(i).flags & kTensorFlagExternal) != 0 && external_[i] == nullptr)
      return Status::Error(StatusCode::kInvalidArgument,
                           "invoke: EXTERNAL input %u is not bound (BindInput)", (unsigned)i);
  for (uint32_t i = 0; i < num_outputs(); ++i)
    if ((output_info(i).flags & kTensorFlagExternal) != 0 && external_out_[i] == nullptr)
      return Status::Error(StatusCode::kInvalidArgument,
                           "invoke: EXTERNAL output %u is not bound (BindOutput)", (unsigned)i);
  return Status::Ok();
}

Status Interpreter::InvokeOp(uint32_t index) {
  if (model_ == nullptr)
    return Status::Error(StatusCode::kNotInitialized, "invoke before a successful init");
  if (index >= model_->num_ops())
    return Status::Error(StatusCode::kInvalidArgument, "op %u of %u", (unsigned)index,
                         (unsigned)model_->num_ops());
  // An op inside a fused region runs as part of its BAND_LOOP (which runs
  // the whole region band by band); invoked alone it does nothing.
  if (band::EnclosingLoop(*model_, index) != band::kNotInRegion) return Status::Ok();
  ESPNN_RETURN_IF_ERROR(CheckBound());
  return RunOp(index);
}

Status Interpreter::RunOp(uint32_t index) {
  const OpInfo op = model_->op(index);
  EvalContext ctx{model_, arena_, scratch_, scratch_bytes_};
  ctx.external = external_;
  ctx.external_out = external_out_;
  ctx.regions = regions_;
  ctx.num_regions = num_regions_;
  Status s = LookupOpKernel(op.opcode)->eval(op, ctx);
  if (!s.ok()) s.Prefix("op %u (%s)", (unsigned)index, OpcodeName(op.opcode));
  return s;
}

Status Interpreter::Invoke() {
  if (model_ == nullptr)
    return Status::Error(StatusCode::kNotInitialized, "invoke before a successful init");
  ESPNN_RETURN_IF_ERROR(CheckBound());
  // Skipping each region's ops here (its BAND_LOOP runs them) keeps
  // InvokeOp's region lookup off this path.
  for (uint32_t i = 0; i < model_->num_ops(); ++i) {
    ESPNN_RETURN_IF_ERROR(RunOp(i));
    const OpInfo op = model_->op(i);
    if (op.opcode == Opcode::BAND_LOOP) i += (uint32_t)op.Params<BAND_LOOP_Params>().num_ops;
  }
  return Status::Ok();
}

}  // namespace espnn
