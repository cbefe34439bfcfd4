// executorch-espnn: thin numpy bindings of the ESP-NN int8 kernels, for tests.
//
// bind_espnn_kernels(m) adds the submodule `kernels` to the extension module
// (Python: executorch_espnn._native.kernels).  Every function calls ESP-NN
// through its generic name from "esp_nn.h" (esp_nn_conv_s8, ...), so the same
// binding runs against the project's stand-in (host/espnn_standin) or against
// the real ESP-NN sources, whichever the build compiled.  `kernels.implementation`
// says which one it is.
//
// The wrappers are deliberately thin: one call per ESP-NN function (FC loops
// over batch rows, as esp-tflite-micro does), arguments in ESP-NN's order and
// conventions (offsets are -zp for inputs, +zp for outputs; shifts are signed
// exponents; ...).  What they add is validation: every array's dtype and shape
// and every scalar's range is checked, and anything that could make ESP-NN
// read or write out of bounds, divide by zero or shift by an undefined amount
// raises ValueError instead.  Outputs are freshly allocated numpy arrays.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "esp_nn.h"

namespace py = pybind11;

namespace {

using i8_array = py::array_t<int8_t, py::array::c_style>;
using i32_array = py::array_t<int32_t, py::array::c_style>;

[[noreturn]] void fail(const std::string &msg) { throw py::value_error(msg); }

std::string shape_str(const py::array &a) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) {
        if (i) s += ", ";
        s += std::to_string(a.shape(i));
    }
    if (a.ndim() == 1) s += ",";
    return s + ")";
}

// A C-contiguous view of `obj`, which must be a numpy array of exactly dtype T.
template <typename T>
py::array_t<T, py::array::c_style> checked_array(const py::handle &obj, const char *name) {
    if (!py::isinstance<py::array>(obj)) {
        fail(std::string(name) + ": expected a numpy.ndarray");
    }
    auto arr = py::reinterpret_borrow<py::array>(obj);
    const py::dtype want = py::dtype::of<T>();
    if (!arr.dtype().equal(want)) {
        fail(std::string(name) + ": expected dtype " + py::str(want).cast<std::string>() + ", got " +
             py::str(arr.dtype()).cast<std::string>());
    }
    if (arr.size() > std::numeric_limits<int32_t>::max()) {
        fail(std::string(name) + ": too many elements");
    }
    return py::array_t<T, py::array::c_style>::ensure(arr);
}

void expect_ndim(const py::array &a, py::ssize_t ndim, const char *name, const char *layout) {
    if (a.ndim() != ndim) {
        fail(std::string(name) + ": expected a " + std::to_string(ndim) + "-D array " + layout + ", got shape " +
             shape_str(a));
    }
}

void expect_len(const py::array &a, int64_t n, const char *name) {
    if (a.ndim() != 1 || a.shape(0) != n) {
        fail(std::string(name) + ": expected shape (" + std::to_string(n) + ",), got " + shape_str(a));
    }
}

int64_t in_range(int64_t v, int64_t lo, int64_t hi, const char *name) {
    if (v < lo || v > hi) {
        fail(std::string(name) + " = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    }
    return v;
}

int32_t i32(int64_t v, const char *name) {
    return static_cast<int32_t>(
        in_range(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), name));
}

int16_t i16(int64_t v, const char *name) {
    return static_cast<int16_t>(in_range(v, -32768, 32767, name));
}

// Geometry that ESP-NN stores in uint16_t.
uint16_t u16(int64_t v, const char *name) { return static_cast<uint16_t>(in_range(v, 0, 65535, name)); }

// Signed requantization exponent (positive = left), as ESP-NN can apply it.
int32_t exponent(int64_t v, const char *name) { return static_cast<int32_t>(in_range(v, -31, 31, name)); }

// The window origin out_idx * stride - pad must stay inside int32 in ESP-NN.
void check_origins(int64_t out, int64_t stride, const char *what) {
    if (out > 0 && (out - 1) * stride > std::numeric_limits<int32_t>::max() / 2) {
        fail(std::string(what) + ": (out - 1) * stride overflows the kernel's int32 arithmetic");
    }
}

// Zero-initialised, 16-byte aligned scratch memory registered for one call.
class Scratch {
  public:
    explicit Scratch(int64_t bytes) : storage_(static_cast<size_t>(bytes > 0 ? bytes : 0) + 32, 0) {}
    void *ptr() {
        auto addr = reinterpret_cast<std::uintptr_t>(storage_.data());
        return storage_.data() + ((16 - addr % 16) % 16);
    }

  private:
    std::vector<uint8_t> storage_;
};

i8_array new_output(const std::vector<py::ssize_t> &shape) {
    i8_array out(shape);
    if (out.size() > 0) {
        std::fill(out.mutable_data(), out.mutable_data() + out.size(), static_cast<int8_t>(0));
    }
    return out;
}

// An output of x's shape.
i8_array new_output_like(const py::array &x) {
    return new_output(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
}

const int32_t *optional_bias(const py::object &bias, i32_array &holder, int64_t out_ch) {
    if (bias.is_none()) return nullptr;
    holder = checked_array<int32_t>(bias, "bias");
    expect_len(holder, out_ch, "bias");
    return holder.data();
}

void check_exponents(const i32_array &shift) {
    for (py::ssize_t i = 0; i < shift.size(); ++i) exponent(shift.data()[i], "shift[i]");
}

// ---- element-wise ----------------------------------------------------------

// ESP-NN's add and mul do not broadcast.
void expect_same_shape(const i8_array &a, const i8_array &b) {
    if (shape_str(a) != shape_str(b)) {
        fail("input2: shape " + shape_str(b) + " differs from input1 " + shape_str(a) + " (no broadcasting)");
    }
}

i8_array add_s8(const py::object &input1, const py::object &input2, int64_t in1_offset, int64_t in2_offset,
                int64_t in1_mult, int64_t in2_mult, int64_t in1_shift, int64_t in2_shift, int64_t left_shift,
                int64_t out_offset, int64_t out_mult, int64_t out_shift, int64_t act_min, int64_t act_max) {
    auto a = checked_array<int8_t>(input1, "input1");
    auto b = checked_array<int8_t>(input2, "input2");
    expect_same_shape(a, b);
    auto out = new_output_like(a);
    esp_nn_add_elementwise_s8(a.data(), b.data(), i32(in1_offset, "in1_offset"), i32(in2_offset, "in2_offset"),
                              i32(in1_mult, "in1_mult"), i32(in2_mult, "in2_mult"),
                              static_cast<int32_t>(in_range(in1_shift, -31, 0, "in1_shift")),
                              static_cast<int32_t>(in_range(in2_shift, -31, 0, "in2_shift")),
                              static_cast<int32_t>(in_range(left_shift, 0, 31, "left_shift")), out.mutable_data(),
                              i32(out_offset, "out_offset"), i32(out_mult, "out_mult"),
                              static_cast<int32_t>(in_range(out_shift, -31, 0, "out_shift")),
                              i32(act_min, "act_min"), i32(act_max, "act_max"), static_cast<int32_t>(a.size()));
    return out;
}

i8_array mul_s8(const py::object &input1, const py::object &input2, int64_t in1_offset, int64_t in2_offset,
                int64_t out_offset, int64_t out_mult, int64_t out_shift, int64_t act_min, int64_t act_max) {
    auto a = checked_array<int8_t>(input1, "input1");
    auto b = checked_array<int8_t>(input2, "input2");
    expect_same_shape(a, b);
    auto out = new_output_like(a);
    esp_nn_mul_elementwise_s8(a.data(), b.data(), i32(in1_offset, "in1_offset"), i32(in2_offset, "in2_offset"),
                              out.mutable_data(), i32(out_offset, "out_offset"), i32(out_mult, "out_mult"),
                              exponent(out_shift, "out_shift"), i32(act_min, "act_min"), i32(act_max, "act_max"),
                              static_cast<int32_t>(a.size()));
    return out;
}

i8_array mul_broadcast_channel_s8(const py::object &input1, const py::object &input2, int64_t in1_offset,
                                  int64_t in2_offset, int64_t out_offset, int64_t out_mult, int64_t out_shift,
                                  int64_t act_min, int64_t act_max) {
    auto a = checked_array<int8_t>(input1, "input1");
    auto b = checked_array<int8_t>(input2, "input2");
    expect_ndim(a, 2, "input1", "[total_spatial, channels]");
    const int64_t spatial = a.shape(0), channels = a.shape(1);
    expect_len(b, channels, "input2");
    auto out = new_output({a.shape(0), a.shape(1)});
    esp_nn_mul_broadcast_channel_s8(a.data(), b.data(), i32(in1_offset, "in1_offset"), i32(in2_offset, "in2_offset"),
                                    out.mutable_data(), i32(out_offset, "out_offset"), i32(out_mult, "out_mult"),
                                    exponent(out_shift, "out_shift"), i32(act_min, "act_min"),
                                    i32(act_max, "act_max"), static_cast<int32_t>(spatial),
                                    static_cast<int32_t>(channels));
    return out;
}

// ---- convolutions ------------------------------------------------------------

// Stride and pad, which ESP-NN keeps in uint16_t, and the window origins of
// an out_h x out_w output.
void check_window(int64_t out_h, int64_t out_w, int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                  const char *what) {
    u16(stride_h, "stride_h");
    u16(stride_w, "stride_w");
    u16(pad_h, "pad_h");
    u16(pad_w, "pad_w");
    check_origins(out_h, stride_h, what);
    check_origins(out_w, stride_w, what);
}

// Per-output-channel mult and shift arrays of length out_ch.
struct PerChannelQuant {
    i32_array mult, shift;

    // ESP-NN's quant_data_t has non-const pointers but only reads them.
    quant_data_t espnn() const {
        return {const_cast<int32_t *>(shift.data()), const_cast<int32_t *>(mult.data())};
    }
};

PerChannelQuant per_channel_quant(const py::object &mult, const py::object &shift, int64_t out_ch) {
    PerChannelQuant q{checked_array<int32_t>(mult, "mult"), checked_array<int32_t>(shift, "shift")};
    expect_len(q.mult, out_ch, "mult");
    expect_len(q.shift, out_ch, "shift");
    check_exponents(q.shift);
    return q;
}

// The fields conv_params_t and dw_conv_params_t share (ESP-NN orders
// stride and padding as {width, height}).
template <typename Params>
Params window_params(int64_t in_offset, int64_t out_offset, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                     int64_t pad_w, int64_t act_min, int64_t act_max) {
    Params params;
    params.in_offset = i32(in_offset, "in_offset");
    params.out_offset = i32(out_offset, "out_offset");
    params.stride = {static_cast<int32_t>(stride_w), static_cast<int32_t>(stride_h)};
    params.padding = {static_cast<int32_t>(pad_w), static_cast<int32_t>(pad_h)};
    params.dilation = {1, 1};
    params.activation = {i32(act_min, "act_min"), i32(act_max, "act_max")};
    return params;
}

// ESP-NN's {width, height, channels, extra} dims.
data_dims_t dims(int64_t w, int64_t h, int64_t c, int32_t extra) {
    return {static_cast<int32_t>(w), static_cast<int32_t>(h), static_cast<int32_t>(c), extra};
}

i8_array conv_s8(const py::object &input, const py::object &filter, const py::object &bias, const py::object &mult,
                 const py::object &shift, int64_t out_h, int64_t out_w, int64_t out_ch, int64_t filter_ch,
                 int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t in_offset,
                 int64_t out_offset, int64_t act_min, int64_t act_max) {
    auto x = checked_array<int8_t>(input, "input");
    auto w = checked_array<int8_t>(filter, "filter");
    expect_ndim(x, 3, "input", "[in_h, in_w, in_ch]");
    expect_ndim(w, 4, "filter", "[out_ch, k_h, k_w, filter_ch]");
    const int64_t in_h = u16(x.shape(0), "in_h"), in_w = u16(x.shape(1), "in_w");
    const int64_t in_ch = in_range(x.shape(2), 1, 65535, "in_ch");
    u16(out_h, "out_h");
    u16(out_w, "out_w");
    u16(out_ch, "out_ch");
    in_range(filter_ch, 0, 65535, "filter_ch");
    const int64_t group_ch = filter_ch == 0 ? in_ch : filter_ch;
    if (in_ch % group_ch != 0) {
        fail("filter_ch = " + std::to_string(group_ch) + " does not divide in_ch = " + std::to_string(in_ch));
    }
    const int64_t groups = in_ch / group_ch;
    if (out_ch % groups != 0) {
        fail("out_ch = " + std::to_string(out_ch) + " is not a multiple of groups = " + std::to_string(groups));
    }
    if (w.shape(0) != out_ch || w.shape(3) != group_ch) {
        fail("filter: expected shape (" + std::to_string(out_ch) + ", k_h, k_w, " + std::to_string(group_ch) +
             "), got " + shape_str(w));
    }
    const int64_t k_h = u16(w.shape(1), "k_h"), k_w = u16(w.shape(2), "k_w");
    check_window(out_h, out_w, stride_h, stride_w, pad_h, pad_w, "conv");
    const PerChannelQuant q = per_channel_quant(mult, shift, out_ch);
    i32_array bias_holder;
    const int32_t *b = optional_bias(bias, bias_holder, out_ch);

    data_dims_t in_dims = dims(in_w, in_h, in_ch, 1);
    data_dims_t f_dims = dims(k_w, k_h, filter_ch, 0);
    data_dims_t o_dims = dims(out_w, out_h, out_ch, 1);
    conv_params_t params =
        window_params<conv_params_t>(in_offset, out_offset, stride_h, stride_w, pad_h, pad_w, act_min, act_max);
    quant_data_t quant = q.espnn();

    auto out = new_output({static_cast<py::ssize_t>(out_h), static_cast<py::ssize_t>(out_w),
                           static_cast<py::ssize_t>(out_ch)});
    Scratch scratch(esp_nn_get_conv_scratch_size(&in_dims, &f_dims, &o_dims, &params));
    esp_nn_set_conv_scratch_buf(scratch.ptr());
    esp_nn_conv_s8(&in_dims, x.data(), &f_dims, w.data(), b, &o_dims, out.mutable_data(), &params, &quant);
    esp_nn_set_conv_scratch_buf(nullptr);
    return out;
}

i8_array depthwise_conv_s8(const py::object &input, const py::object &filter, const py::object &bias,
                           const py::object &mult, const py::object &shift, int64_t out_h, int64_t out_w,
                           int64_t ch_mult, int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                           int64_t in_offset, int64_t out_offset, int64_t act_min, int64_t act_max) {
    auto x = checked_array<int8_t>(input, "input");
    auto w = checked_array<int8_t>(filter, "filter");
    expect_ndim(x, 3, "input", "[in_h, in_w, in_ch]");
    expect_ndim(w, 3, "filter", "[k_h, k_w, in_ch * ch_mult]");
    const int64_t in_h = u16(x.shape(0), "in_h"), in_w = u16(x.shape(1), "in_w");
    const int64_t in_ch = u16(x.shape(2), "in_ch");
    u16(out_h, "out_h");
    u16(out_w, "out_w");
    u16(ch_mult, "ch_mult");
    const int64_t out_ch = in_ch * ch_mult;
    if (w.shape(2) != out_ch) {
        fail("filter: expected shape (k_h, k_w, " + std::to_string(out_ch) + "), got " + shape_str(w));
    }
    const int64_t k_h = u16(w.shape(0), "k_h"), k_w = u16(w.shape(1), "k_w");
    check_window(out_h, out_w, stride_h, stride_w, pad_h, pad_w, "depthwise");
    const PerChannelQuant q = per_channel_quant(mult, shift, out_ch);
    i32_array bias_holder;
    const int32_t *b = optional_bias(bias, bias_holder, out_ch);

    data_dims_t in_dims = dims(in_w, in_h, in_ch, 1);
    data_dims_t f_dims = dims(k_w, k_h, out_ch, 0);
    data_dims_t o_dims = dims(out_w, out_h, out_ch, 1);
    dw_conv_params_t params = window_params<dw_conv_params_t>(in_offset, out_offset, stride_h, stride_w, pad_h,
                                                              pad_w, act_min, act_max);
    params.ch_mult = static_cast<int32_t>(ch_mult);
    quant_data_t quant = q.espnn();

    auto out = new_output({static_cast<py::ssize_t>(out_h), static_cast<py::ssize_t>(out_w),
                           static_cast<py::ssize_t>(out_ch)});
    Scratch scratch(esp_nn_get_depthwise_conv_scratch_size(&in_dims, &f_dims, &o_dims, &params));
    esp_nn_set_depthwise_conv_scratch_buf(scratch.ptr());
    esp_nn_depthwise_conv_s8(&in_dims, x.data(), &f_dims, w.data(), b, &o_dims, out.mutable_data(), &params,
                             &quant);
    esp_nn_set_depthwise_conv_scratch_buf(nullptr);
    return out;
}

// ---- fully connected -----------------------------------------------------------

struct FcShape {
    int64_t batch, row_len, out_ch;
    bool batched;
};

FcShape fc_shapes(const i8_array &x, const i8_array &w) {
    if (x.ndim() != 1 && x.ndim() != 2) {
        fail("input: expected [row_len] or [batch, row_len], got shape " + shape_str(x));
    }
    expect_ndim(w, 2, "filter", "[out_ch, row_len]");
    FcShape s;
    s.batched = x.ndim() == 2;
    s.batch = s.batched ? x.shape(0) : 1;
    s.row_len = u16(x.shape(x.ndim() - 1), "row_len");
    s.out_ch = u16(w.shape(0), "out_ch");
    if (w.shape(1) != s.row_len) {
        fail("filter: expected shape (out_ch, " + std::to_string(s.row_len) + "), got " + shape_str(w));
    }
    return s;
}

i8_array new_fc_output(const FcShape &s) {
    if (s.batched) return new_output({static_cast<py::ssize_t>(s.batch), static_cast<py::ssize_t>(s.out_ch)});
    return new_output({static_cast<py::ssize_t>(s.out_ch)});
}

i8_array fully_connected_s8(const py::object &input, int64_t in_offset, const py::object &filter,
                            int64_t filter_offset, const py::object &bias, int64_t out_offset, int64_t shift,
                            int64_t mult, int64_t act_min, int64_t act_max) {
    auto x = checked_array<int8_t>(input, "input");
    auto w = checked_array<int8_t>(filter, "filter");
    const FcShape s = fc_shapes(x, w);
    i32_array bias_holder;
    const int32_t *b = optional_bias(bias, bias_holder, s.out_ch);
    const int32_t io = i32(in_offset, "in_offset"), fo = i32(filter_offset, "filter_offset");
    const int32_t oo = i32(out_offset, "out_offset"), sh = exponent(shift, "shift"), mu = i32(mult, "mult");
    const int32_t lo = i32(act_min, "act_min"), hi = i32(act_max, "act_max");
    auto out = new_fc_output(s);
    for (int64_t r = 0; r < s.batch; ++r) {
        esp_nn_fully_connected_s8(x.data() + r * s.row_len, io, static_cast<uint16_t>(s.row_len), w.data(), fo, b,
                                  out.mutable_data() + r * s.out_ch, static_cast<uint16_t>(s.out_ch), oo, sh, mu,
                                  lo, hi);
    }
    return out;
}

i8_array fully_connected_per_ch_s8(const py::object &input, int64_t in_offset, const py::object &filter,
                                   int64_t filter_offset, const py::object &bias, int64_t out_offset,
                                   const py::object &shift, const py::object &mult, int64_t act_min,
                                   int64_t act_max) {
    auto x = checked_array<int8_t>(input, "input");
    auto w = checked_array<int8_t>(filter, "filter");
    const FcShape s = fc_shapes(x, w);
    i32_array bias_holder;
    const int32_t *b = optional_bias(bias, bias_holder, s.out_ch);
    auto sh = checked_array<int32_t>(shift, "shift");
    auto mu = checked_array<int32_t>(mult, "mult");
    expect_len(sh, s.out_ch, "shift");
    expect_len(mu, s.out_ch, "mult");
    check_exponents(sh);
    const int32_t io = i32(in_offset, "in_offset"), fo = i32(filter_offset, "filter_offset");
    const int32_t oo = i32(out_offset, "out_offset");
    const int32_t lo = i32(act_min, "act_min"), hi = i32(act_max, "act_max");
    auto out = new_fc_output(s);
    for (int64_t r = 0; r < s.batch; ++r) {
        esp_nn_fully_connected_per_ch_s8(x.data() + r * s.row_len, io, static_cast<uint16_t>(s.row_len), w.data(),
                                         fo, b, out.mutable_data() + r * s.out_ch, static_cast<uint16_t>(s.out_ch),
                                         oo, sh.data(), mu.data(), lo, hi);
    }
    return out;
}

// ---- pooling ---------------------------------------------------------------------

using pool_fn = void (*)(const int8_t *, const uint16_t, const uint16_t, int8_t *, const uint16_t, const uint16_t,
                         const uint16_t, const uint16_t, const uint16_t, const uint16_t, const uint16_t,
                         const uint16_t, const int32_t, const int32_t, const uint16_t);

// Number of in-image taps of the emptiest window along one axis.
int64_t min_taps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
    int64_t fewest = k;
    for (int64_t o = 0; o < out; ++o) {
        const int64_t origin = o * stride - pad;
        const int64_t first = origin < 0 ? -origin : 0;
        const int64_t last = std::min(k, in - origin);
        fewest = std::min(fewest, std::max<int64_t>(0, last - first));
    }
    return fewest;
}

// Average pool (NeedsTaps: it divides by the tap count) or max pool.
template <pool_fn Fn, bool NeedsTaps>
i8_array pool_s8(const py::object &input, int64_t out_h, int64_t out_w, int64_t stride_h, int64_t stride_w,
                 int64_t k_h, int64_t k_w, int64_t pad_h, int64_t pad_w, int64_t act_min, int64_t act_max) {
    auto x = checked_array<int8_t>(input, "input");
    expect_ndim(x, 3, "input", "[in_h, in_w, channels]");
    const uint16_t in_h = u16(x.shape(0), "in_h"), in_w = u16(x.shape(1), "in_w");
    const uint16_t ch = u16(x.shape(2), "channels");
    const uint16_t oh = u16(out_h, "out_h"), ow = u16(out_w, "out_w");
    const uint16_t sh = u16(stride_h, "stride_h"), sw = u16(stride_w, "stride_w");
    const uint16_t kh = u16(k_h, "k_h"), kw = u16(k_w, "k_w");
    const uint16_t ph = u16(pad_h, "pad_h"), pw = u16(pad_w, "pad_w");
    check_origins(oh, sh, "pool");
    check_origins(ow, sw, "pool");
    if (NeedsTaps && ch > 0 && oh > 0 && ow > 0 &&
        (min_taps(in_h, oh, kh, sh, ph) == 0 || min_taps(in_w, ow, kw, sw, pw) == 0)) {
        // ESP-NN's average pool divides by the tap count.
        fail("avg_pool: some output window has no tap inside the input");
    }
    auto out = new_output({oh, ow, ch});
    Fn(x.data(), in_w, in_h, out.mutable_data(), ow, oh, sw, sh, kw, kh, pw, ph, i32(act_min, "act_min"),
       i32(act_max, "act_max"), ch);
    return out;
}

// ---- softmax, mean, activations ---------------------------------------------------

i8_array softmax_s8(const py::object &input, int64_t mult, int64_t shift, int64_t diff_min) {
    auto x = checked_array<int8_t>(input, "input");
    if (x.ndim() < 1) fail("input: expected at least 1 dimension (softmax runs over the last)");
    const int64_t width = x.shape(x.ndim() - 1);
    if (x.size() > 0 && width == 0) fail("input: the last dimension must not be empty");
    const int64_t height = width > 0 ? x.size() / width : 0;
    const int32_t m = i32(mult, "mult");
    const int32_t s = static_cast<int32_t>(in_range(shift, 0, 31, "shift"));
    const int32_t d = static_cast<int32_t>(in_range(diff_min, std::numeric_limits<int32_t>::min(), 0, "diff_min"));
    auto out = new_output_like(x);
    if (x.size() == 0) return out;
    Scratch scratch(esp_nn_get_softmax_scratch_size(static_cast<int32_t>(width), static_cast<int32_t>(height)));
    esp_nn_set_softmax_scratch_buf(scratch.ptr());
    esp_nn_softmax_s8(x.data(), static_cast<int32_t>(height), static_cast<int32_t>(width), m, s, d,
                      out.mutable_data());
    esp_nn_set_softmax_scratch_buf(nullptr);
    return out;
}

i8_array mean_s8(const py::object &input, int64_t input_zp, int64_t output_zp, int64_t mult, int64_t shift) {
    auto x = checked_array<int8_t>(input, "input");
    expect_ndim(x, 3, "input", "[H, W, C]");
    auto out = new_output({x.shape(2)});
    esp_nn_mean_nhwc_s8(x.data(), out.mutable_data(), static_cast<int32_t>(x.shape(0)),
                        static_cast<int32_t>(x.shape(1)), static_cast<int32_t>(x.shape(2)), i32(input_zp, "input_zp"),
                        i32(output_zp, "output_zp"), i32(mult, "mult"), exponent(shift, "shift"));
    return out;
}

i8_array hard_swish_s8(const py::object &input, int64_t input_zp, int64_t output_mult_fxp, int64_t reluish_mult_fxp,
                       int64_t reluish_mult_exp, int64_t output_mult_exp, int64_t output_zp) {
    auto x = checked_array<int8_t>(input, "input");
    auto out = new_output_like(x);
    const int16_t izp = i16(input_zp, "input_zp"), ozp = i16(output_zp, "output_zp");
    const int16_t omf = i16(output_mult_fxp, "output_mult_fxp"), rmf = i16(reluish_mult_fxp, "reluish_mult_fxp");
    const int32_t rme = exponent(reluish_mult_exp, "reluish_mult_exp");
    const int32_t ome = static_cast<int32_t>(in_range(output_mult_exp, -31, 0, "output_mult_exp"));
    Scratch scratch(esp_nn_get_hard_swish_scratch_size());
    void *scratch_ptr = scratch.ptr();
    (void)scratch_ptr;  // unused when the set call expands to nothing (ANSI builds)
    esp_nn_set_hard_swish_scratch_buf(scratch_ptr);
    esp_nn_hard_swish_s8(x.data(), out.mutable_data(), static_cast<int32_t>(x.size()), izp, omf, rmf, rme, ome, ozp);
    esp_nn_set_hard_swish_scratch_buf(nullptr);
    return out;
}

i8_array logistic_prepare(int64_t input_zp, float input_scale) {
    if (esp_nn_get_logistic_s8_scratch_size() != 256) fail("unexpected logistic LUT size");
    auto lut = new_output({256});
    esp_nn_logistic_s8_prepare(lut.mutable_data(), i32(input_zp, "input_zp"), input_scale);
    return lut;
}

i8_array logistic_s8(const py::object &input, const py::object &lut) {
    auto x = checked_array<int8_t>(input, "input");
    auto table = checked_array<int8_t>(lut, "lut");
    expect_len(table, 256, "lut");
    auto out = new_output_like(x);
    esp_nn_logistic_s8(x.data(), out.mutable_data(), static_cast<int32_t>(x.size()), table.data());
    return out;
}

i8_array relu6_s8(const py::object &input) {
    auto x = checked_array<int8_t>(input, "input");
    if (x.size() > 65535) fail("input: ESP-NN's relu6 takes at most 65535 elements (uint16_t size)");
    auto out = new_output_like(x);
    if (x.size() > 0) std::copy(x.data(), x.data() + x.size(), out.mutable_data());
    esp_nn_relu6_s8(out.mutable_data(), static_cast<uint16_t>(x.size()));
    return out;
}

}  // namespace

void bind_espnn_kernels(py::module_ &m) {
    py::module_ k = m.def_submodule(
        "kernels",
        "Thin numpy wrappers of the ESP-NN int8 kernels (for tests). Arguments follow ESP-NN's conventions: "
        "input offsets are -zero_point, output offsets +zero_point, shifts are signed exponents (positive = "
        "left) unless noted; activations are NHWC, one image.");
#ifdef ESPNN_STANDIN
    k.attr("implementation") = "stand-in";
    k.attr("espnn_version") = ESPNN_STANDIN_VERSION;
#else
    k.attr("implementation") = "esp-nn";
#ifdef ESPNN_VERSION_STRING
    k.attr("espnn_version") = ESPNN_VERSION_STRING;
#else
    k.attr("espnn_version") = "unknown";
#endif
#endif

    k.def("add_s8", &add_s8, py::arg("input1"), py::arg("input2"), py::arg("in1_offset"), py::arg("in2_offset"),
          py::arg("in1_mult"), py::arg("in2_mult"), py::arg("in1_shift"), py::arg("in2_shift"),
          py::arg("left_shift"), py::arg("out_offset"), py::arg("out_mult"), py::arg("out_shift"),
          py::arg("act_min"), py::arg("act_max"),
          "esp_nn_add_elementwise_s8 on two same-shape int8 arrays; *_shift <= 0, left_shift >= 0.");
    k.def("mul_s8", &mul_s8, py::arg("input1"), py::arg("input2"), py::arg("in1_offset"), py::arg("in2_offset"),
          py::arg("out_offset"), py::arg("out_mult"), py::arg("out_shift"), py::arg("act_min"), py::arg("act_max"),
          "esp_nn_mul_elementwise_s8 on two same-shape int8 arrays.");
    k.def("mul_broadcast_channel_s8", &mul_broadcast_channel_s8, py::arg("input1"), py::arg("input2"),
          py::arg("in1_offset"), py::arg("in2_offset"), py::arg("out_offset"), py::arg("out_mult"),
          py::arg("out_shift"), py::arg("act_min"), py::arg("act_max"),
          "esp_nn_mul_broadcast_channel_s8: input1 [total_spatial, channels] times input2 [channels].");
    k.def("conv_s8", &conv_s8, py::arg("input"), py::arg("filter"), py::arg("bias"), py::arg("mult"),
          py::arg("shift"), py::arg("out_h"), py::arg("out_w"), py::arg("out_ch"), py::arg("filter_ch"),
          py::arg("stride_h"), py::arg("stride_w"), py::arg("pad_h"), py::arg("pad_w"), py::arg("in_offset"),
          py::arg("out_offset"), py::arg("act_min"), py::arg("act_max"),
          "esp_nn_conv_s8: input [in_h, in_w, in_ch], filter [out_ch, k_h, k_w, filter_ch] (OHWI; filter_ch = "
          "in_ch / groups, 0 = in_ch), bias int32 [out_ch] or None, mult/shift int32 [out_ch]. Returns "
          "[out_h, out_w, out_ch].");
    k.def("depthwise_conv_s8", &depthwise_conv_s8, py::arg("input"), py::arg("filter"), py::arg("bias"),
          py::arg("mult"), py::arg("shift"), py::arg("out_h"), py::arg("out_w"), py::arg("ch_mult"),
          py::arg("stride_h"), py::arg("stride_w"), py::arg("pad_h"), py::arg("pad_w"), py::arg("in_offset"),
          py::arg("out_offset"), py::arg("act_min"), py::arg("act_max"),
          "esp_nn_depthwise_conv_s8: input [in_h, in_w, in_ch], filter [k_h, k_w, in_ch * ch_mult]. Returns "
          "[out_h, out_w, in_ch * ch_mult].");
    k.def("fully_connected_s8", &fully_connected_s8, py::arg("input"), py::arg("in_offset"), py::arg("filter"),
          py::arg("filter_offset"), py::arg("bias"), py::arg("out_offset"), py::arg("shift"), py::arg("mult"),
          py::arg("act_min"), py::arg("act_max"),
          "esp_nn_fully_connected_s8 (per-tensor shift, mult): input [row_len] or [batch, row_len] (one call per "
          "row), filter [out_ch, row_len].");
    k.def("fully_connected_per_ch_s8", &fully_connected_per_ch_s8, py::arg("input"), py::arg("in_offset"),
          py::arg("filter"), py::arg("filter_offset"), py::arg("bias"), py::arg("out_offset"), py::arg("shift"),
          py::arg("mult"), py::arg("act_min"), py::arg("act_max"),
          "esp_nn_fully_connected_per_ch_s8: as fully_connected_s8 with int32 [out_ch] shift and mult arrays.");
    k.def("avg_pool_s8", &pool_s8<&esp_nn_avg_pool_s8, true>, py::arg("input"), py::arg("out_h"), py::arg("out_w"),
          py::arg("stride_h"), py::arg("stride_w"), py::arg("k_h"), py::arg("k_w"), py::arg("pad_h"),
          py::arg("pad_w"), py::arg("act_min"), py::arg("act_max"),
          "esp_nn_avg_pool_s8 on input [in_h, in_w, channels]; every window needs an in-image tap.");
    k.def("max_pool_s8", &pool_s8<&esp_nn_max_pool_s8, false>, py::arg("input"), py::arg("out_h"), py::arg("out_w"),
          py::arg("stride_h"), py::arg("stride_w"), py::arg("k_h"), py::arg("k_w"), py::arg("pad_h"),
          py::arg("pad_w"), py::arg("act_min"), py::arg("act_max"),
          "esp_nn_max_pool_s8 on input [in_h, in_w, channels].");
    k.def("softmax_s8", &softmax_s8, py::arg("input"), py::arg("mult"), py::arg("shift"), py::arg("diff_min"),
          "esp_nn_softmax_s8 over the last dimension (width); shift >= 0 is TFLite's input_left_shift.");
    k.def("mean_s8", &mean_s8, py::arg("input"), py::arg("input_zp"), py::arg("output_zp"), py::arg("mult"),
          py::arg("shift"),
          "esp_nn_mean_nhwc_s8: [H, W, C] -> [C]; raw zero points; 1/(H*W) folded into mult/shift.");
    k.def("hard_swish_s8", &hard_swish_s8, py::arg("input"), py::arg("input_zp"), py::arg("output_mult_fxp"),
          py::arg("reluish_mult_fxp"), py::arg("reluish_mult_exp"), py::arg("output_mult_exp"),
          py::arg("output_zp"), "esp_nn_hard_swish_s8; raw zero points, Q15 multipliers.");
    k.def("logistic_prepare", &logistic_prepare, py::arg("input_zp"), py::arg("input_scale"),
          "esp_nn_logistic_s8_prepare: returns the 256-entry int8 LUT (index with uint8(x)).");
    k.def("logistic_s8", &logistic_s8, py::arg("input"), py::arg("lut"), "esp_nn_logistic_s8 with a prepared LUT.");
    k.def("relu6_s8", &relu6_s8, py::arg("input"),
          "esp_nn_relu6_s8 on a copy of input: clamps raw int8 values to [0, 6].");
    k.def("logistic_scratch_size", []() { return esp_nn_get_logistic_s8_scratch_size(); },
          "esp_nn_get_logistic_s8_scratch_size()");
    k.def(
        "softmax_scratch_size",
        [](int64_t width, int64_t height) {
            return esp_nn_get_softmax_scratch_size(i32(width, "width"), i32(height, "height"));
        },
        py::arg("width"), py::arg("height"), "esp_nn_get_softmax_scratch_size(width, height)");
}
