// The ESP32-S3 routing of the runtime's ops (src/ops/s3_route.h), for the
// analysis and the lowering: per op of a parsed program (Program.op_routes,
// and the summary's "s3_routes"), per depthwise geometry before a program
// exists (s3_depthwise_route), and every op family's rule text and kernel
// names (S3_ROUTE_RULES; S3_ROUTE_DEFAULT for the ops without one). Nothing here decides a route.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "espnn/model.h"
#include "ops/s3_route.h"

namespace py = pybind11;
using namespace espnn;

namespace {

py::dict RouteDict(const S3Route& r) {
  py::dict d;
  d["simd"] = r.simd;
  d["simd_fraction"] = r.simd_fraction;
  d["kernel"] = r.kernel;
  d["reason"] = r.reason;
  return d;
}

}  // namespace

// One dict per op of `model`, with the op's data where an interpreter on
// `arena` finds it (alignment decides some routes; an EXTERNAL input, bound
// only at run time, counts as aligned).
py::list S3OpRoutes(const Model& model, uint8_t* arena) {
  EvalContext ctx{&model, arena, nullptr, 0};
  py::list out;
  for (uint32_t i = 0; i < model.num_ops(); ++i) out.append(RouteDict(DescribeS3Route(model.op(i), ctx)));
  return out;
}

void bind_s3_routes(py::module_& m) {
  py::dict rules;
  for (const auto& [name, code] : {
#define ESPNN_X(name, code, ver, imin, imax, omin, omax, opt) \
  std::pair<const char*, xts3::Opcode>{#name, xts3::Opcode::name},
           ESPNN_XTS3_OPS(ESPNN_X)
#undef ESPNN_X
       }) {
    const S3RouteRule* rule = LookupS3RouteRule(code);
    if (rule == nullptr) continue;
    py::list kernels;
    for (const char* const* k = rule->kernels; *k != nullptr; ++k) kernels.append(*k);
    py::dict d;
    d["doc"] = rule->doc;
    d["kernels"] = kernels;
    rules[name] = d;
  }
  m.attr("S3_ROUTE_RULES") = rules;
  py::dict fallback;
  fallback["kernel"] = kS3DefaultKernel;
  fallback["reason"] = kS3DefaultReason;
  m.attr("S3_ROUTE_DEFAULT") = fallback;

  m.def(
      "s3_depthwise_route",
      [](std::tuple<uint32_t, uint32_t, uint32_t> in_hwc, std::pair<uint32_t, uint32_t> kernel, int32_t ch_mult,
         std::pair<uint32_t, uint32_t> out_hw, std::pair<int32_t, int32_t> stride, std::pair<int32_t, int32_t> padding,
         std::pair<int32_t, int32_t> dilation, int32_t input_offset) {
        const auto [in_h, in_w, in_c] = in_hwc;
        if (ch_mult < 1 || in_c < 1) throw py::value_error("ch_mult and channels must be >= 1");
        const uint32_t out_c = in_c * (uint32_t)ch_mult;
        conv_util::ConvShape s{1, in_h, in_w, in_c, out_hw.first, out_hw.second, out_c, 1, kernel.first,
                               kernel.second, out_c};
        xts3::DEPTHWISE_CONV2D_Params p{};
        p.stride_h = stride.first;
        p.stride_w = stride.second;
        p.pad_top = padding.first;
        p.pad_left = padding.second;
        p.dilation_h = dilation.first;
        p.dilation_w = dilation.second;
        p.ch_mult = ch_mult;
        p.input_offset = input_offset;
        const char* route_name = "";
        py::dict d = RouteDict(DescribeS3DepthwiseLayer(s, p, &route_name));
        d["route"] = route_name;
        return d;
      },
      py::arg("in_hwc"), py::arg("kernel"), py::arg("ch_mult"), py::arg("out_hw"), py::arg("stride"),
      py::arg("padding"), py::arg("dilation"), py::arg("input_offset"),
      "How an optimized ESP32-S3 build routes a batch-1 DEPTHWISE_CONV2D of this geometry (16-byte aligned "
      "data): the op's route dict plus 'route', the branch of depthwise_conv.cpp RouteDepthwise that decided "
      "(own_kernel, staged_padding, ansi_tiled_pad_defect, espnn).");
}
