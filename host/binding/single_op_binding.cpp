// _native.run_op and _native.OPLIB_OPS: the operator-library mode's ops
// (espnn/oplib_ops.h) as the Python reference implementations call them:
// through RunSingleOp, the very function the ExecuTorch kernels call.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "espnn/model.h"
#include "espnn/oplib_ops.h"
#include "espnn/single_op.h"

namespace py = pybind11;
using namespace espnn;

namespace {

bool DTypeOf(const py::dtype& d, xts3::DType* out) {
  if (d.equal(py::dtype::of<int8_t>())) *out = xts3::DType::INT8;
  else if (d.equal(py::dtype::of<int32_t>())) *out = xts3::DType::INT32;
  else if (d.equal(py::dtype::of<float>())) *out = xts3::DType::FLOAT32;
  else return false;
  return true;
}

SingleOpTensor Describe(const py::array& a, bool constant, const std::string& what) {
  SingleOpTensor t;
  if (!DTypeOf(a.dtype(), &t.dtype)) throw py::value_error(what + ": dtype must be int8, int32 or float32");
  if (a.ndim() < 1 || a.ndim() > (py::ssize_t)xts3::kMaxRank)
    throw py::value_error(what + ": rank must be 1.." + std::to_string(xts3::kMaxRank));
  if (!(a.flags() & py::array::c_style)) throw py::value_error(what + ": must be C-contiguous");
  t.rank = (uint8_t)a.ndim();
  for (py::ssize_t i = 0; i < a.ndim(); ++i) t.dims[i] = (uint32_t)a.shape(i);
  t.data = const_cast<void*>(a.data());
  t.constant = constant;
  return t;
}

// A SingleOpCall over numpy arrays (which must outlive it).
struct Call {
  std::vector<SingleOpTensor> ins, outs;
  SingleOpCall call;
  Call(uint16_t opcode, const std::vector<std::optional<py::array>>& inputs, uint32_t activations,
       const std::vector<py::array>& outputs, const std::vector<int32_t>& params,
       std::pair<int32_t, int32_t> zero_points)
      : ins(inputs.size()), outs(outputs.size()) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i]) ins[i] = Describe(*inputs[i], i >= activations, "input " + std::to_string(i));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].writeable()) throw py::value_error("output " + std::to_string(i) + " is read-only");
      outs[i] = Describe(outputs[i], false, "output " + std::to_string(i));
    }
    // The records' zero points of input 0 and output 0 (the ops of
    // espnn/oplib_ops.h with zero_points = 1 take them as arguments).
    if (!ins.empty()) ins[0].zero_point = zero_points.first;
    if (!outs.empty()) outs[0].zero_point = zero_points.second;
    call = SingleOpCall{(xts3::Opcode)opcode, ins.data(), (uint32_t)ins.size(), outs.data(),
                        (uint32_t)outs.size(), params.data(), (uint32_t)params.size()};
  }
};

}  // namespace

void bind_single_op(py::module_& m) {
  py::dict ops;
#define ESPNN_X(name, opcode, activations, zero_points) \
  ops[#name] = py::make_tuple(#opcode, activations, OpcodeHasScratch(xts3::Opcode::opcode), (bool)zero_points);
  ESPNN_OPLIB_OPS(ESPNN_X)
#undef ESPNN_X
  m.attr("OPLIB_OPS") = ops;
  m.def(
      "run_op",
      [](uint16_t opcode, const std::vector<std::optional<py::array>>& inputs, uint32_t activations,
         const std::vector<py::array>& outputs, const std::vector<int32_t>& params,
         std::pair<int32_t, int32_t> zero_points) {
        Call call(opcode, inputs, activations, outputs, params, zero_points);
        // Like ExecuTorch's memory plan for the kernels: the scratch the
        // call needs, 16-byte aligned, from the caller (RunSingleOp has none).
        uint32_t bytes = 0;
        Status s = SingleOpScratchBytes(call.call, &bytes);
        std::vector<uint8_t> scratch(bytes ? bytes + 15 : 0);
        if (s.ok() && bytes) {
          call.call.scratch = (void*)(((uintptr_t)scratch.data() + 15) & ~(uintptr_t)15);
          call.call.scratch_bytes = bytes;
        }
        if (s.ok()) s = RunSingleOp(call.call);
        if (!s.ok()) throw py::value_error(s.message());
      },
      py::arg("opcode"), py::arg("inputs"), py::arg("activations"), py::arg("outputs"), py::arg("params"),
      py::arg("zero_points") = std::pair<int32_t, int32_t>(0, 0),
      "Runs one XTS3 op (its opcode number, OPCODES[name]['opcode']; RunSingleOp, espnn/single_op.h) on numpy "
      "arrays: inputs in the op's order (None for an absent optional one), the first `activations` of them "
      "activations and the rest constants; writes the preallocated `outputs`; params are the opcode's "
      "parameter words; zero_points are the zero points of input 0 and output 0 in the op's tensor records (GRU, LSTM "
      "read them there). Raises ValueError with the parser's or the kernel's message.");
  m.def(
      "op_scratch_bytes",
      [](uint16_t opcode, const std::vector<std::optional<py::array>>& inputs, uint32_t activations,
         const std::vector<py::array>& outputs, const std::vector<int32_t>& params,
         std::pair<int32_t, int32_t> zero_points) {
        Call call(opcode, inputs, activations, outputs, params, zero_points);
        uint32_t bytes = 0;
        const Status s = SingleOpScratchBytes(call.call, &bytes);
        if (!s.ok()) throw py::value_error(s.message());
        return bytes;
      },
      py::arg("opcode"), py::arg("inputs"), py::arg("activations"), py::arg("outputs"), py::arg("params"),
      py::arg("zero_points") = std::pair<int32_t, int32_t>(0, 0),
      "The scratch bytes run_op's op needs with these arguments (SingleOpScratchBytes: this build's ESP-NN "
      "scratch-size functions and the op's own staging); activation contents are not read.");
}
