// executorch_espnn._native: the device runtime, compiled for the host.
//
// Exposes the XTS3 format constants (from xts3_format.h, the single source
// of truth that the Python writer reads), the native parser, and the
// interpreter running on numpy arrays. No arithmetic is done here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "constant_dict.h"
#include "espnn/band_geometry.h"
#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "espnn/pte_check.h"
#include "espnn/xts3_format.h"

namespace py = pybind11;
using namespace espnn;
using namespace espnn::xts3;

void bind_espnn_kernels(py::module_& m);        // kernels_binding.cpp
void bind_container_constants(py::module_& m);  // container_constants.cpp
void bind_single_op(py::module_& m);           // single_op_binding.cpp
// s3_routes_binding.cpp: the ESP32-S3 route of each op of a program, and the routing's module functions.
py::list S3OpRoutes(const Model& model, uint8_t* arena);
void bind_s3_routes(py::module_& m);
void bind_placement(py::module_& m);  // placement_binding.cpp

namespace {

// A heap buffer whose data pointer is 16-byte aligned (the blob, the arena
// and the scratch buffer all need it).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes) : raw_(new uint8_t[bytes + 16]()) {
    uintptr_t p = reinterpret_cast<uintptr_t>(raw_.get());
    data_ = reinterpret_cast<uint8_t*>((p + 15) & ~uintptr_t(15));
    size_ = bytes;
  }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t[]> raw_;
  uint8_t* data_;
  size_t size_;
};

py::dtype NumpyDType(DType d) {
  switch (d) {
    case DType::INT8: return py::dtype::of<int8_t>();
    case DType::INT32: return py::dtype::of<int32_t>();
    case DType::FLOAT32: return py::dtype::of<float>();
  }
  throw py::value_error("unknown dtype");
}

std::vector<ssize_t> Shape(const TensorInfo& t) {
  return std::vector<ssize_t>(t.dims, t.dims + t.rank);
}

py::dict TensorDict(const TensorInfo& t, uint32_t index) {
  py::dict d;
  d["index"] = index;
  d["dtype"] = DTypeName(t.dtype);
  d["shape"] = py::tuple(py::cast(Shape(t)));
  d["memory"] = t.memory == Memory::ARENA ? "ARENA" : "CONSTANT";
  d["offset"] = t.offset;
  d["nbytes"] = t.nbytes;
  d["scale"] = t.scale;
  d["zero_point"] = t.zero_point;
  d["flags"] = t.flags;
  return d;
}

// Parameter field names per opcode, from the X-macros in xts3_format.h.
std::vector<std::string> ParamNames(Opcode op) {
  switch (op) {
#define ESPNN_FIELD_NAME(name) names.push_back(#name);
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) \
  case Opcode::name: {                                        \
    std::vector<std::string> names;                           \
    ESPNN_XTS3_PARAMS_##name(ESPNN_FIELD_NAME) return names;  \
  }
    ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
#undef ESPNN_FIELD_NAME
  }
  return {};
}

// The first format version that has each parameter field of `op` (its own
// first version, or the later one that appended the field).
py::tuple ParamVersions(Opcode op, uint16_t first_version) {
  std::vector<uint16_t> versions;
  for (uint16_t v = first_version; v <= kFormatVersion; ++v)
    while (versions.size() < NumParamsInVersion(op, v)) versions.push_back(v);
  return py::tuple(py::cast(versions));
}

py::dict OpDict(const OpInfo& op) {
  py::dict d;
  d["index"] = op.index;
  d["op"] = OpcodeName(op.opcode);
  d["debug_handle"] = op.debug_handle;
  py::list ins, outs;
  for (uint32_t k = 0; k < op.num_inputs; ++k)
    ins.append(op.inputs[k] == kNoTensor ? py::object(py::none()) : py::int_(op.inputs[k]));
  for (uint32_t k = 0; k < op.num_outputs; ++k) outs.append(op.outputs[k]);
  d["inputs"] = ins;
  d["outputs"] = outs;
  py::dict params;
  std::vector<std::string> names = ParamNames(op.opcode);
  // A field newer than the blob's version (ESPNN_XTS3_PARAM_APPENDS) is what
  // the runtime reads for it: 0.
  for (size_t k = 0; k < names.size(); ++k) {
    int32_t v = 0;
    if (k < op.params_count) std::memcpy(&v, op.params + 4 * k, 4);
    params[names[k].c_str()] = v;
  }
  d["params"] = params;
  return d;
}

const char* AliasingName(Aliasing a) {
  switch (a) {
    case Aliasing::VIEW: return "VIEW";
    case Aliasing::IN_PLACE: return "IN_PLACE";
    case Aliasing::NONE: break;
  }
  return "NONE";
}

// A parsed blob that can be run repeatedly: owns aligned copies of the
// blob, the arena and the scratch buffer, like the device glue does.
//
// Threads: Run() releases the GIL while the interpreter runs, and the
// instance has one arena, one scratch buffer and one set of EXTERNAL input
// bindings. So calls of Run() on one instance are serialized by its own
// mutex (from the first input copy to the last output copy); different
// instances run side by side. The read-only accessors need no lock.
// A row window for Python: (index, stride, pad, extent), with the stride's
// denominator appended when it is not 1 (band_geometry.h RowWindow: the
// upsampling ops), so windows over the input keep their 4-tuple.
py::tuple WindowTuple(uint32_t index, const band::RowWindow& w) {
  if (w.den == 1) return py::make_tuple(index, w.stride, w.pad, w.extent);
  return py::make_tuple(index, w.stride, w.pad, w.extent, w.den);
}

class Program {
 public:
  explicit Program(py::bytes blob) {
    std::string bytes = blob;
    blob_ = std::make_unique<AlignedBuffer>(bytes.size());
    std::memcpy(blob_->data(), bytes.data(), bytes.size());
    Status s = ParseModel(blob_->data(), blob_->size(), &model_);
    if (!s.ok()) throw py::value_error(s.message());
    req_ = ComputeMemoryRequirements(model_);
    arena_ = std::make_unique<AlignedBuffer>(req_.arena_bytes);
    scratch_ = std::make_unique<AlignedBuffer>(req_.scratch_bytes);
    persistent_ = std::make_unique<AlignedBuffer>(req_.persistent_bytes);
    s = interp_.Init(&model_, arena_->data(), arena_->size(), scratch_->data(), scratch_->size(),
                     persistent_->data(), persistent_->size());
    if (!s.ok()) throw py::value_error(s.message());
  }

  uint32_t arena_bytes() const { return req_.arena_bytes; }
  uint32_t scratch_bytes() const { return req_.scratch_bytes; }
  uint32_t persistent_bytes() const { return req_.persistent_bytes; }
  const Model& model() const { return model_; }

  py::dict Summary() const {
    py::dict d;
    d["version"] = model_.version();
    d["size"] = model_.size();
    d["arena_bytes"] = req_.arena_bytes;
    d["scratch_bytes"] = req_.scratch_bytes;
    py::list tensors, ops, inputs, outputs;
    for (uint32_t i = 0; i < model_.num_tensors(); ++i) tensors.append(TensorDict(model_.tensor(i), i));
    for (uint32_t i = 0; i < model_.num_ops(); ++i) ops.append(OpDict(model_.op(i)));
    for (uint32_t i = 0; i < model_.num_inputs(); ++i) inputs.append(model_.input(i));
    for (uint32_t i = 0; i < model_.num_outputs(); ++i) outputs.append(model_.output(i));
    d["tensors"] = tensors;
    d["ops"] = ops;
    d["inputs"] = inputs;
    d["outputs"] = outputs;
    d["s3_routes"] = OpRoutes();
    return d;
  }

  // Per op, how an optimized ESP32-S3 build routes it (s3_routes_binding.cpp).
  py::list OpRoutes() const { return S3OpRoutes(model_, arena_->data()); }

  // Per op: how it reads rows if it can run in a fused region (ops/band_loop.cpp
  // DescribeOp), as [(input slot, stride, pad, extent[, den]), ...], else None.
  py::list BandSupport() const {
    py::list out;
    for (uint32_t i = 0; i < model_.num_ops(); ++i) {
      band::OpBandSupport s;
      if (!band::DescribeOp(model_, model_.op(i), &s)) {
        out.append(py::none());
        continue;
      }
      py::list ins;
      for (uint32_t j = 0; j < s.num_inputs; ++j)
        ins.append(WindowTuple(s.slot[j], s.window[j]));
      out.append(ins);
    }
    return out;
  }

  py::list Run(const std::vector<py::array>& inputs, bool bind_outputs = true) {
    // Uncontended: taken at once. Contended: wait without the GIL, so the
    // thread inside Invoke can take it back to copy its outputs.
    std::unique_lock<std::mutex> lock(run_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      py::gil_scoped_release release;
      lock.lock();
    }
    if (inputs.size() != interp_.num_inputs())
      throw py::value_error("expected " + std::to_string(interp_.num_inputs()) +
                            " inputs, got " + std::to_string(inputs.size()));
    if (!bind_outputs) {
      // Init forgets every binding, so no earlier run's (freed) output array
      // stays bound.
      const Status s = interp_.Init(&model_, arena_->data(), arena_->size(), scratch_->data(),
                                    scratch_->size(), persistent_->data(), persistent_->size());
      if (!s.ok()) throw std::runtime_error(s.message());
    }
    std::vector<py::array> bound;  // EXTERNAL feeds, alive until Invoke returns
    for (uint32_t i = 0; i < interp_.num_inputs(); ++i) {
      const TensorInfo t = interp_.input_info(i);
      py::array a = inputs[i];
      if (!a.dtype().equal(NumpyDType(t.dtype)))
        throw py::value_error("input " + std::to_string(i) + ": dtype " +
                              std::string(py::str(a.dtype())) + ", the graph expects " +
                              DTypeName(t.dtype));
      std::vector<ssize_t> want = Shape(t);
      std::vector<ssize_t> got(a.shape(), a.shape() + a.ndim());
      if (want != got)
        throw py::value_error("input " + std::to_string(i) + ": shape " +
                              std::string(py::str(py::cast(got))) + ", the graph expects " +
                              std::string(py::str(py::cast(want))));
      py::array c = py::array::ensure(a, py::array::c_style);
      if (t.flags & kTensorFlagExternal) {
        // Zero-copy: the interpreter reads the feed itself (kept alive in
        // `bound` through Invoke); a misaligned view is copied first.
        if ((uintptr_t)c.data() % DTypeSize(t.dtype) != 0)
          c = py::array(c.dtype(), std::vector<ssize_t>(c.shape(), c.shape() + c.ndim()), c.data());
        bound.push_back(c);
        const Status b = interp_.BindInput(i, c.data(), (size_t)c.nbytes());
        if (!b.ok()) throw py::value_error(b.message());
      } else {
        std::memcpy(interp_.input_data(i), c.data(), t.nbytes);
      }
    }
    // EXTERNAL outputs are written straight into the arrays returned (numpy
    // allocates them aligned to the element size); the others are copied.
    py::list outs;
    for (uint32_t i = 0; i < interp_.num_outputs(); ++i) {
      const TensorInfo t = interp_.output_info(i);
      py::array out(NumpyDType(t.dtype), Shape(t));
      if ((t.flags & kTensorFlagExternal) && bind_outputs) {
        const Status b = interp_.BindOutput(i, out.mutable_data(), (size_t)out.nbytes());
        if (!b.ok()) throw std::runtime_error(b.message());
      }
      outs.append(out);
    }
    Status s;
    {
      py::gil_scoped_release release;
      s = interp_.Invoke();
    }
    if (!s.ok()) throw std::runtime_error(s.message());
    for (uint32_t i = 0; i < interp_.num_outputs(); ++i) {
      const TensorInfo t = interp_.output_info(i);
      if ((t.flags & kTensorFlagExternal) == 0)
        std::memcpy(py::cast<py::array>(outs[i]).mutable_data(), interp_.output_data(i), t.nbytes);
    }
    return outs;
  }

 private:
  std::unique_ptr<AlignedBuffer> blob_, arena_, scratch_, persistent_;
  Model model_;
  MemoryRequirements req_{};
  Interpreter interp_;
  std::mutex run_mutex_;  // one Run() at a time per instance (see the class comment)
};

void BindFormatConstants(py::module_& m) {
  const NamedConstant scalars[] = {
      {"FORMAT_MAGIC", kMagic},
      {"FORMAT_VERSION", kFormatVersion},
      {"MIN_FORMAT_VERSION", kMinFormatVersion},
      {"TENSOR_FLAG_MIN_VERSION", kTensorFlagMinVersion},
      {"EXTERNAL_OUTPUT_MIN_VERSION", kExternalOutputMinVersion},
      {"HEADER_SIZE", kHeaderSize},
      {"SECTION_ENTRY_SIZE", kSectionEntrySize},
      {"TENSOR_RECORD_SIZE", kTensorRecordSize},
      {"OP_RECORD_SIZE", kOpRecordSize},
      {"NO_TENSOR", kNoTensor},
      {"CONSTANT_ALIGNMENT", kConstantAlignment},
      {"ARENA_ALIGNMENT", kArenaAlignment},
      {"BLOB_ALIGNMENT", kBlobAlignment},
      {"LUT_ENTRIES", kLutEntries},
      {"BILINEAR_FRAC_BITS", kBilinearFracBits},
      {"NORM_EPS_FRAC_BITS", kNormEpsFracBits},
      {"NORM_VALUE_FRAC_BITS", kNormValueFracBits},
      {"NORM_BETA_FRAC_BITS", kNormBetaFracBits},
      {"RECURRENT_GATE_FRAC_BITS", kRecurrentGateFracBits},
      {"RECURRENT_STATE_FRAC_BITS", kRecurrentStateFracBits},
      {"RECURRENT_CELL_FRAC_BITS", kRecurrentCellFracBits},
      {"RECURRENT_TABLE_STEP_BITS", kRecurrentTableStepBits},
      {"RECURRENT_TABLE_ENTRIES", kRecurrentTableEntries},
  };
  for (const NamedConstant& c : scalars) m.attr(c.name) = c.value;
  // Signed, so not a NamedConstant: LAYER_NORM's gamma_shift bounds.
  m.attr("NORM_GAMMA_SHIFT_RANGE") = py::make_tuple(kNormMinGammaShift, kNormMaxGammaShift);

  // Byte offsets of the fields of the fixed-size records.
  m.attr("HEADER_FIELDS") = ConstantDict({
      {"magic", kHdrMagic}, {"version", kHdrVersion}, {"header_size", kHdrHeaderSize},
      {"blob_size", kHdrBlobSize}, {"flags", kHdrFlags}, {"arena_size", kHdrArenaSize},
      {"section_count", kHdrSectionCount}, {"section_table", kHdrSectionTable},
      {"reserved", kHdrReserved}});
  m.attr("TENSOR_FIELDS") = ConstantDict({
      {"dtype", kTenDtype}, {"rank", kTenRank}, {"memory", kTenMemory}, {"flags", kTenFlags},
      {"offset", kTenOffset}, {"nbytes", kTenNbytes}, {"zero_point", kTenZeroPoint},
      {"scale", kTenScale}, {"dims", kTenDims}});
  m.attr("OP_FIELDS") = ConstantDict({
      {"opcode", kOpOpcode}, {"num_inputs", kOpNumInputs}, {"num_outputs", kOpNumOutputs},
      {"io_start", kOpIoStart}, {"params_start", kOpParamsStart},
      {"params_count", kOpParamsCount}, {"debug_handle", kOpDebugHandle}});
  m.attr("LIMITS") = ConstantDict({
      {"max_rank", kMaxRank}, {"max_tensors", kMaxTensors}, {"max_ops", kMaxOps},
      {"max_graph_inputs", kMaxGraphInputs}, {"max_graph_outputs", kMaxGraphOutputs},
      {"max_op_inputs", kMaxOpInputs}, {"max_op_outputs", kMaxOpOutputs}, {"max_dim", kMaxDim},
      {"max_kernel_dim", kMaxKernelDim}, {"max_tensor_bytes", kMaxTensorBytes},
      {"max_arena_bytes", kMaxArenaBytes}, {"max_blob_bytes", kMaxBlobBytes},
      {"max_softmax_width", kMaxSoftmaxWidth}, {"max_norm_width", kMaxNormWidth},
      {"max_region_ops", kMaxRegionOps}, {"max_region_tensors", kMaxRegionTensors}});
  m.attr("TENSOR_FLAGS") = ConstantDict({{"BANDED", kTensorFlagBanded}, {"EXTERNAL", kTensorFlagExternal}});
  m.attr("BAND_FLAGS") = ConstantDict({{"IN_PLACE", (uint32_t)kBandFlagInPlace}});

  // The header's X-macro tables.
  py::dict sections, dtypes, memory, opcodes;
#define ESPNN_X(name, id, rec) sections[#name] = py::make_tuple(id, rec);
  ESPNN_XTS3_SECTIONS(ESPNN_X)
#undef ESPNN_X
#define ESPNN_X(name, id, size) dtypes[#name] = py::make_tuple(id, size);
  ESPNN_XTS3_DTYPES(ESPNN_X)
#undef ESPNN_X
#define ESPNN_X(name, id) memory[#name] = id;
  ESPNN_XTS3_MEMORY_KINDS(ESPNN_X)
#undef ESPNN_X
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt)                                \
  {                                                                                         \
    py::dict d = ConstantDict({{"opcode", code}, {"min_version", ver}, {"min_inputs", imin}, \
                               {"max_inputs", imax}, {"min_outputs", omin},                 \
                               {"max_outputs", omax}, {"optional_inputs", opt}});           \
    d["params"] = py::tuple(py::cast(ParamNames(Opcode::name)));                            \
    d["param_versions"] = ParamVersions(Opcode::name, ver);                                 \
    d["aliasing"] = AliasingName(OpAliasing(Opcode::name));                                 \
    opcodes[#name] = d;                                                                     \
  }
  ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
  m.attr("SECTIONS") = sections;
  m.attr("DTYPES") = dtypes;
  m.attr("MEMORY_KINDS") = memory;
  m.attr("OPCODES") = opcodes;
}


// ---- fused regions: the planner asks the parser's rules (ops/band_loop.h) --
//
// memory/fused_regions.py plans regions on a layer-by-layer program; whether a run
// of its ops may form a region, and how, is band::DescribeCandidate's answer:
// the checks the parser runs on a BAND_LOOP, on the hypothesis that the run's
// intermediate outputs are BANDED. Nothing of those rules is written in Python.
void BindRegionCandidates(py::module_&, py::class_<Program>& program) {
  program.def(
      "describe_region",
      [](const Program& p, uint32_t first_op, uint32_t num_ops, bool in_place) -> py::object {
        band::Region r;
        band::RegionStorage storage;
        storage.Attach(&r);
        const Status s = band::DescribeCandidate(p.model(), first_op, num_ops, in_place, &r);
        if (!s.ok()) return py::str(s.message());
        const band::RegionDesc& d = r.desc;
        py::list ops;
        for (uint32_t i = 0; i < d.num_ops; ++i) {
          py::list ins;
          for (uint32_t j = 0; j < d.ops[i].num_inputs; ++j) {
            ins.append(WindowTuple(d.ops[i].in[j], d.ops[i].window[j]));
          }
          ops.append(py::make_tuple(d.ops[i].out, ins));
        }
        py::dict out;
        out["tensors"] = std::vector<uint16_t>(r.tensors, r.tensors + d.num_tensors);
        out["heights"] = std::vector<uint32_t>(d.height, d.height + d.num_tensors);
        out["ops"] = ops;
        out["in_place_input"] = in_place ? py::object(py::int_(d.in_place_input)) : py::object(py::none());
        out["persistent_bytes"] = band::PerRegionBytes(d.num_ops, d.num_tensors);
        return std::move(out);
      },
      py::arg("first_op"), py::arg("num_ops"), py::arg("in_place") = false,
      "Whether ops first_op .. first_op+num_ops-1 of this program (layer by layer there) may form a "
      "fused region, by the parser's own checks: the reason it would refuse one (str), or the "
      "region's description on local tensor indices (dict: tensors = program tensor per local "
      "index, heights, ops = [(out, [(in, stride, pad, extent[, den]), ...]), ...], in_place_input, "
      "persistent_bytes = what Interpreter::Init keeps for it).");
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "executorch-espnn device runtime (XTS3 parser + int8 interpreter), host build";
  BindFormatConstants(m);
  bind_container_constants(m);
  m.attr("KERNEL_SOURCE") = ESPNN_KERNEL_SOURCE;

  auto program = py::class_<Program>(m, "Program",
                      "A parsed XTS3 blob with its own arena and scratch, ready to run.")
      .def(py::init<py::bytes>(), py::arg("blob"))
      .def_property_readonly("arena_bytes", &Program::arena_bytes)
      .def_property_readonly("scratch_bytes", &Program::scratch_bytes)
      .def_property_readonly("persistent_bytes", &Program::persistent_bytes,
                             "Bytes of the fused regions' descriptions Interpreter::Init keeps (0 "
                             "without BAND_LOOP).")
      .def("summary", &Program::Summary)
      .def("op_routes", &Program::OpRoutes,
           "Per op: how an optimized ESP32-S3 build routes it, as the runtime's kernels decide "
           "(src/ops/s3_route.h): {simd, simd_fraction, kernel, reason}. Also the summary's 's3_routes'.")
      .def("band_support", &Program::BandSupport,
           "Per op: [(input slot, stride, pad, extent[, den]), ...] of the rows it reads if it can run in a "
           "fused region (BAND_LOOP), else None.")
      .def("run", &Program::Run, py::arg("inputs"), py::arg("bind_outputs") = true,
           "Runs the graph on numpy arrays (dtype and shape must match the graph inputs). Thread-safe: "
           "calls on one Program take turns (a mutex per instance), different Programs run in parallel. "
           "EXTERNAL outputs are written straight into the returned arrays; bind_outputs=False leaves "
           "them unbound (Invoke then refuses to run: the runtime's contract, for tests).");

  // The row arithmetic of fused regions (espnn/band_geometry.h PlanRegion),
  // for the Python planner: it describes a candidate region on local tensor
  // indices and gets back what the parser will demand of it.
  m.def(
      "plan_band_region",
      [](const std::vector<std::pair<uint32_t, std::vector<std::vector<int64_t>>>>& ops,
         const std::vector<uint32_t>& heights, uint32_t band_rows, int64_t in_place_input) {
        band::RegionDesc d;
        band::RegionDescStorage storage;
        storage.Attach(&d);
        if (ops.empty() || ops.size() > kMaxRegionOps) throw py::value_error("1..kMaxRegionOps ops");
        if (heights.size() > kMaxRegionTensors) throw py::value_error("too many tensors");
        if (band_rows < 1) throw py::value_error("band_rows must be >= 1");
        d.num_ops = (uint32_t)ops.size();
        d.num_tensors = (uint32_t)heights.size();
        for (uint32_t t = 0; t < d.num_tensors; ++t) {
          if (heights[t] < 1 || heights[t] > kMaxDim) throw py::value_error("height out of range");
          d.height[t] = heights[t];
        }
        for (uint32_t i = 0; i < d.num_ops; ++i) {
          const auto& [out, ins] = ops[i];
          if (out >= d.num_tensors || ins.size() > band::kMaxRegionOpRowInputs)
            throw py::value_error("bad op description");
          d.ops[i].out = out;
          d.ops[i].num_inputs = (uint32_t)ins.size();
          for (uint32_t j = 0; j < ins.size(); ++j) {
            // (in, stride, pad, extent[, den]): WindowTuple's form.
            const std::vector<int64_t>& w = ins[j];
            if (w.size() != 4 && w.size() != 5) throw py::value_error("bad window");
            const int64_t t = w[0], stride = w[1], pad = w[2], extent = w[3], den = w.size() == 5 ? w[4] : 1;
            if (t < 0 || t >= d.num_tensors || stride < 1 || extent < 1 || den < 1 || stride > 65535 ||
                extent > 65535 || den > 65535 || (den == 1 && (pad < 0 || pad > 65535)) ||
                pad < INT32_MIN || pad > INT32_MAX)
              throw py::value_error("bad window");
            d.ops[i].in[j] = (uint32_t)t;
            d.ops[i].window[j] = {(int32_t)stride, (int32_t)pad, (uint16_t)extent, (uint16_t)den};
          }
        }
        d.in_place_input = in_place_input < 0 ? d.num_tensors : (uint32_t)in_place_input;
        if (in_place_input >= (int64_t)d.num_tensors) throw py::value_error("bad in_place_input");
        band::RegionPlan plan;
        band::PlanRegion(d, band_rows, &plan);
        py::dict r;
        r["capacity"] = std::vector<uint32_t>(plan.capacity, plan.capacity + d.num_tensors);
        r["computed"] = std::vector<uint32_t>(plan.computed, plan.computed + d.num_ops);
        r["staging_rows"] = plan.staging_rows;
        r["num_bands"] = plan.num_bands;
        return r;
      },
      py::arg("ops"), py::arg("heights"), py::arg("band_rows"), py::arg("in_place_input") = -1,
      "PlanRegion of espnn/band_geometry.h: ops = [(out, [(in, stride, pad, extent[, den]), ...]), ...] on "
      "local tensor indices, heights per local tensor. Returns capacity (rows per tensor), "
      "staging_rows, computed (rows per op) and num_bands.");
  m.def(
      "parse",
      [](py::bytes blob) { return Program(blob).Summary(); }, py::arg("blob"),
      "Parses and validates a blob; returns a summary dict or raises ValueError with the "
      "parser's message.");
  m.def(
      "run",
      [](py::bytes blob, const std::vector<py::array>& inputs) { return Program(blob).Run(inputs); },
      py::arg("blob"), py::arg("inputs"), "Parses a blob and runs it once.");
  // The device's .pte check (espnn/pte_check.h), run by every Python path
  // before ExecuTorch's loader sees a program.
  m.def(
      "check_pte",
      [](py::bytes pte) {
        const std::string bytes = pte;
        const Status s = pte::CheckProgram(bytes.data(), bytes.size());
        if (!s.ok()) throw py::value_error(s.message());
      },
      py::arg("pte"),
      "Checks an ExecuTorch program (.pte bytes) for what ExecuTorch 1.5.1's loader reads unchecked; "
      "returns None or raises ValueError with a one-line message.");

  BindRegionCandidates(m, program);
  bind_espnn_kernels(m);
  bind_s3_routes(m);
  bind_single_op(m);
  bind_placement(m);
}
