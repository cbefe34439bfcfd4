"""EspNNQuantizer: export -> prepare_pt2e -> calibrate -> convert_pt2e
(executorch_espnn.quantize, or torchao's calls where a test edits the graph or
reads the prepared model) on small modules, then the converted graph is inspected (which values are int8, with which qparams).

The oracle is PyTorch itself: the q/dq nodes convert_pt2e writes and the float model.
"""

import pytest

pytest.importorskip("executorch")
torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torchao.quantization.pt2e import (  # noqa: E402
    HistogramObserver,
    MinMaxObserver,
)
from torchao.quantization.pt2e.quantize_pt2e import (  # noqa: E402
    convert_pt2e,
    prepare_pt2e,
)
from torchao.quantization.pt2e.quantizer import QuantizationSpec  # noqa: E402
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY  # noqa: E402

from executorch_espnn import quantize as espnn_quantize  # noqa: E402
from executorch_espnn.quantizer import (  # noqa: E402
    EspNNQuantizationConfig,
    EspNNQuantizer,
    get_espnn_quantization_config,
)

qd = torch.ops.quantized_decomposed
aten = torch.ops.aten
Q_T = qd.quantize_per_tensor.default
DQ_T = qd.dequantize_per_tensor.default
DQ_C = qd.dequantize_per_channel.default


# ---- helpers ------------------------------------------------------------------------


def _inputs(shape, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g),) for _ in range(n)]


def quantize(model, shape, quantizer=None, calib=None):
    """executorch_espnn.quantize; returns (converted gm, calibration inputs)."""
    calib = calib or _inputs(shape)
    return espnn_quantize(model, calib[0], calib, quantizer=quantizer), calib


def calls(gm, *targets):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in targets]


def one(gm, target):
    nodes = calls(gm, target)
    assert len(nodes) == 1, f"expected one {target}, found {[n.name for n in nodes]}"
    return nodes[0]


def const(gm, node):
    assert node.op == "get_attr", node
    obj = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part)
    return obj


def in_qparams(node, i=0):
    """(scale, zero_point) of the int8 value feeding argument i (a per-tensor dequantize)."""
    dq = node.args[i]
    assert dq.target == DQ_T, f"{node.name} arg {i} is {dq.target}, not an int8 dequantize"
    assert dq.args[3:6] == (-128, 127, torch.int8)
    return dq.args[1], dq.args[2]


def out_qparams(node):
    """(scale, zero_point) of the quantize right after node (its only user)."""
    users = list(node.users)
    assert len(users) == 1 and users[0].target == Q_T, f"{node.name} output is not quantized: {users}"
    q = users[0]
    assert q.args[3:6] == (-128, 127, torch.int8)
    return q.args[1], q.args[2]


def is_float_op(node):
    """The op computes in float: its output is not quantized and, for conv/linear,
    its weight is the float parameter (its input may be a dequantized value)."""
    if any(u.target == Q_T for u in node.users):
        return False
    if node.target in (aten.conv2d.default, aten.linear.default):
        return node.args[1].target not in (DQ_T, DQ_C)
    return True


def source(node):
    """The op behind a chain of quantize/dequantize nodes."""
    while node.target in (Q_T, DQ_T):
        node = node.args[0]
    return node


def check_weight_and_bias(gm, op, ch_axis, out_channels, per_channel=True):
    """Weight int8 symmetric on ch_axis; bias int32, zp 0, scale = s_in * s_w."""
    s_in, _ = in_qparams(op, 0)
    wdq = op.args[1]
    if per_channel:
        assert wdq.target == DQ_C
        w_q, w_scale, w_zp = const(gm, wdq.args[0]), const(gm, wdq.args[1]), const(gm, wdq.args[2])
        assert wdq.args[3] == ch_axis
        assert w_scale.numel() == w_q.shape[ch_axis]
        assert torch.all(w_zp == 0)
    else:
        assert wdq.target == DQ_T
        w_q, w_scale = const(gm, wdq.args[0]), torch.tensor([wdq.args[1]])
        assert wdq.args[2] == 0
    assert w_q.dtype == torch.int8
    assert wdq.args[-3:] == (-127, 127, torch.int8)
    assert int(w_q.min()) >= -127
    bdq = op.args[2]
    assert bdq.target in (DQ_C, DQ_T)
    b_q = const(gm, bdq.args[0])
    assert b_q.dtype == torch.int32 and b_q.numel() == out_channels
    assert bdq.args[-1] == torch.int32
    if bdq.target == DQ_C:
        b_scale, b_zp = const(gm, bdq.args[1]), const(gm, bdq.args[2])
        assert torch.all(b_zp == 0)
    else:
        b_scale = torch.tensor([bdq.args[1]])
        assert bdq.args[2] == 0
    groups = out_channels // w_scale.numel() if per_channel else 1
    expected = (s_in * w_scale.double().reshape(-1).repeat(groups)).float()
    if not per_channel:
        expected = expected.expand(b_scale.numel())
    torch.testing.assert_close(b_scale.float().reshape(-1), expected, rtol=1e-6, atol=0)


def assert_close_to_float(model, q, calib, rel=0.06):
    with torch.no_grad():
        for args in calib:
            ref, out = model(*args), q(*args)
            ref, out = (ref, out) if isinstance(ref, tuple) else ((ref,), (out,))
            for r, o in zip(ref, out):
                span = float(r.max() - r.min()) or 1.0
                err = float((r - o).abs().max())
                assert err <= rel * span, f"max error {err:.4f} > {rel} * range {span:.4f}"


# ---- conv / linear + fused activations ----------------------------------------------


class ConvReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(x))


def test_conv_relu_one_output_observer_per_channel_weights_int32_bias():
    model = ConvReLU()
    q, calib = quantize(model, (1, 3, 8, 8))
    conv, relu = one(q, aten.conv2d.default), one(q, aten.relu.default)
    # fused: conv feeds relu directly, one quantize after the relu
    assert list(conv.users) == [relu] and relu.args[0] is conv
    scale, zp = out_qparams(relu)
    assert zp == -128  # relu output range starts at 0
    check_weight_and_bias(q, conv, ch_axis=0, out_channels=8)
    assert_close_to_float(model, q, calib)


ACTIVATIONS = {
    "relu": lambda y: F.relu(y),
    "ReLU6": nn.ReLU6(),
    "F.relu6": lambda y: F.relu6(y),
    "hardtanh_positional": lambda y: F.hardtanh(y, -0.5, 0.5),
    "hardtanh_kwargs": lambda y: F.hardtanh(y, min_val=-0.5, max_val=0.5),
    "Hardtanh_module_kwargs": nn.Hardtanh(min_val=0.0, max_val=3.0),
    "clamp_kwargs": lambda y: torch.clamp(y, min=0.0, max=2.0),
    "clamp_min_only": lambda y: torch.clamp(y, 0.0),
}


class LinearAct(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_linear_activation_fuses(name):
    q, _ = quantize(LinearAct(ACTIVATIONS[name]), (2, 16))
    fc = one(q, aten.linear.default)
    (act,) = fc.users
    assert act.target in (aten.relu.default, aten.relu6.default, aten.hardtanh.default, aten.clamp.default)
    out_qparams(act)
    check_weight_and_bias(q, fc, ch_axis=0, out_channels=8)


def test_hardtanh_with_keyword_min_max_fuses():
    # torch.export writes min/max positionally; graphs rewritten by other passes may
    # carry them as keywords. Fusion must not depend on where they are.
    model = LinearAct(nn.Hardtanh(min_val=-0.5, max_val=0.5)).eval()
    gm = torch.export.export(model, (torch.randn(2, 16),)).module()
    (ht,) = calls(gm, aten.hardtanh.default)
    ht.args, ht.kwargs = (ht.args[0],), {"min_val": -0.5, "max_val": 0.5}
    gm.recompile()
    prepared = prepare_pt2e(gm, EspNNQuantizer())
    for (x,) in _inputs((2, 16)):
        prepared(x)
    q = convert_pt2e(prepared)
    fc, ht = one(q, aten.linear.default), one(q, aten.hardtanh.default)
    assert ht.args[0] is fc and list(fc.users) == [ht]
    assert ht.kwargs == {"min_val": -0.5, "max_val": 0.5}
    scale, zp = out_qparams(ht)
    # the observer sits after the clamp: the int8 range covers [-0.5, 0.5], not more
    assert (-128 - zp) * scale >= -0.5 - 2 * scale and (127 - zp) * scale <= 0.5 + 2 * scale


def test_activation_not_fused_when_producer_has_other_users():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)

        def forward(self, x):
            y = self.conv(x)
            return F.relu(y) + y

    q, _ = quantize(M(), (1, 3, 4, 4))
    conv, relu = one(q, aten.conv2d.default), one(q, aten.relu.default)
    out_qparams(conv)  # conv keeps its own output observer
    in_qparams(relu)
    out_qparams(relu)


class ConvBnHardtanh(nn.Module):
    def __init__(self, bias):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, bias=bias)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return F.hardtanh(self.bn(self.conv(x)), min_val=0.0, max_val=6.0)


@pytest.mark.parametrize("bias", [True, False])
def test_ptq_folds_batch_norm_and_quantizes_folded_bias(bias):
    model = ConvBnHardtanh(bias)
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    q, calib = quantize(model, (1, 3, 8, 8))
    assert not calls(q, aten.batch_norm.default)
    conv, ht = one(q, aten.conv2d.default), one(q, aten.hardtanh.default)
    assert ht.args[0] is conv
    check_weight_and_bias(q, conv, ch_axis=0, out_channels=8)
    assert_close_to_float(model, q, calib)


def test_conv1d_weights_per_channel():
    model = nn.Sequential(nn.Conv1d(4, 6, 3), nn.ReLU())
    q, _ = quantize(model, (1, 4, 16))
    conv = one(q, aten.conv1d.default)
    assert list(conv.users)[0].target == aten.relu.default
    check_weight_and_bias(q, conv, ch_axis=0, out_channels=6)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_transpose_weights_on_axis_1(groups):
    # ConvTranspose2d weights are [Cin, Cout/groups, kh, kw]: output channels on axis 1;
    # with groups > 1 output channel c uses weight scale c % (Cout/groups).
    model = nn.Sequential(nn.ConvTranspose2d(4, 6, 2, stride=2, groups=groups), nn.ReLU())
    q, calib = quantize(model, (1, 4, 5, 5))
    ct = one(q, aten.conv_transpose2d.input)
    check_weight_and_bias(q, ct, ch_axis=1, out_channels=6)
    assert_close_to_float(model, q, calib)


def test_per_tensor_weights_option():
    model = ConvReLU()
    quantizer = EspNNQuantizer(get_espnn_quantization_config(per_channel=False))
    q, calib = quantize(model, (1, 3, 8, 8), quantizer)
    check_weight_and_bias(q, one(q, aten.conv2d.default), ch_axis=0, out_channels=8, per_channel=False)
    assert_close_to_float(model, q, calib)


def test_runtime_computed_weight_stays_float():
    class M(nn.Module):
        def forward(self, x, w):
            return F.linear(x, w)

    q = espnn_quantize(M(), (torch.randn(2, 4), torch.randn(3, 4)), [(torch.randn(2, 4), torch.randn(3, 4))])
    assert is_float_op(one(q, aten.linear.default))


# ---- add / mul ------------------------------------------------------------------------


class AddMul(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.register_buffer("gain", torch.linspace(0.5, 1.5, 4).reshape(4, 1, 1))

    def forward(self, x):
        y = self.conv(x)
        a = F.relu(x + y)  # add + relu fused
        m = a * self.gain  # broadcast against a constant tensor
        return m * 0.5 + 1.0  # scalar operands


def test_add_mul_operands_and_output_int8_with_fused_relu():
    model = AddMul()
    q, calib = quantize(model, (1, 4, 6, 6))
    adds, muls = calls(q, aten.add.Tensor), calls(q, aten.mul.Tensor)
    assert len(adds) == 2 and len(muls) == 2
    for node in adds + muls:
        in_qparams(node, 0)
        in_qparams(node, 1)  # scalars and the buffer became int8 constants
    add_relu = next(a for a in adds if a.args[1].args[0].args[0].target == aten.conv2d.default)
    (relu,) = add_relu.users
    assert relu.target == aten.relu.default
    out_qparams(relu)
    for node in [a for a in adds if a is not add_relu] + muls:
        out_qparams(node)
    assert_close_to_float(model, q, calib)


class Matmuls(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        q, k = self.a(x), self.b(x)
        scores = F.relu(q @ k.transpose(-2, -1))
        return torch.bmm(scores, k), q[0, 0] @ k[0, 0]  # the last: 1-D operands, left float


def test_matmul_operands_and_output_int8_with_fused_relu():
    model = Matmuls()
    q, calib = quantize(model, (2, 5, 8))
    mm_2d, mm_1d = sorted(calls(q, aten.matmul.default), key=lambda n: n.meta["val"].dim(), reverse=True)
    (bmm,) = calls(q, aten.bmm.default)
    for node in (mm_2d, bmm):
        in_qparams(node, 0)
        in_qparams(node, 1)
    (relu,) = mm_2d.users
    assert relu.target == aten.relu.default
    assert out_qparams(relu)[1] == -128  # the relu is fused: the output observer sees only >= 0
    out_qparams(bmm)
    assert all(u.target != Q_T for u in mm_1d.users)
    assert_close_to_float(model, q, calib)


def test_integer_add_is_left_alone():
    class M(nn.Module):
        def forward(self, x, n):
            return torch.sigmoid(x), n + 1

    q = espnn_quantize(M(), (torch.randn(3), torch.tensor([2])), [(torch.randn(3), torch.tensor([2]))])
    assert is_float_op(one(q, aten.add.Tensor))
    assert q(torch.zeros(3), torch.tensor([2]))[1].dtype == torch.int64


# ---- fixed-qparam and requantizing unary ops --------------------------------------------


class Unary(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        return (
            F.softmax(y, dim=-1),
            torch.sigmoid(y),
            torch.tanh(y),
            F.hardswish(y),
            F.silu(y),
            F.gelu(y),
            F.hardsigmoid(y),
            F.elu(y),
            F.leaky_relu(y, 0.2),
            F.selu(y),
            F.celu(y, 1.3),
            F.mish(y),
            F.softplus(y, 2.0),
            F.logsigmoid(y),
            F.prelu(y, torch.tensor([0.1])),
        )


@pytest.fixture(scope="module")
def unary_quantized():
    model = Unary()
    q, calib = quantize(model, (2, 8))
    return model, q, calib


@pytest.mark.parametrize(
    "target,scale,zp",
    [
        (aten.softmax.int, 1 / 256, -128),
        (aten.sigmoid.default, 1 / 256, -128),
        (aten.tanh.default, 1 / 128, 0),
    ],
)
def test_fixed_output_qparams(unary_quantized, target, scale, zp):
    _, q, _ = unary_quantized
    node = one(q, target)
    fc = one(q, aten.linear.default)
    assert in_qparams(node) == out_qparams(fc)  # input: the producer's qparams, no requantize
    assert out_qparams(node) == (scale, zp)


@pytest.mark.parametrize(
    "target",
    [
        aten.hardswish.default,
        aten.silu.default,
        aten.gelu.default,
        aten.hardsigmoid.default,
        aten.elu.default,
        aten.leaky_relu.default,
        aten.selu.default,
        aten.celu.default,
        aten.mish.default,
        aten.softplus.default,
        aten.log_sigmoid.default,
        aten.prelu.default,
    ],
)
def test_unary_ops_get_their_own_output_observer(unary_quantized, target):
    _, q, _ = unary_quantized
    node = one(q, target)
    assert in_qparams(node) == out_qparams(one(q, aten.linear.default))
    assert out_qparams(node) != in_qparams(node)


def test_unary_model_close_to_float(unary_quantized):
    model, q, calib = unary_quantized
    assert_close_to_float(model, q, calib)


@pytest.mark.parametrize(
    "act", [nn.ReLU(), nn.ReLU6(), nn.Hardtanh(-0.5, 0.5)], ids=["relu", "relu6", "hardtanh"]
)
def test_standalone_clamp_keeps_its_input_qparams(act):
    # Not absorbed by a conv/linear/add/mul: int8 clamping is exact only when the
    # output keeps the input's qparams (the lowering clamps with a 1x1 pool).
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2), act)
    q, calib = quantize(model, (1, 3, 9, 9))
    (node,) = calls(q, aten.relu.default, aten.hardtanh.default)
    pool = one(q, aten.max_pool2d.default)
    assert in_qparams(node) == out_qparams(node) == out_qparams(pool)
    assert_close_to_float(model, q, calib)


def test_consumer_reuses_producer_qparams_without_requantizing():
    # sigmoid's output is fixed at (1/256, -128); a consumer configured with another
    # observer (MinMax, via the module type) must read those qparams, not add its own.
    class Gate(nn.Module):
        def forward(self, s, y):
            return s * y

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.gate = Gate()

        def forward(self, x):
            y = self.fc(x)
            return self.gate(torch.sigmoid(y), y)

    minmax = get_espnn_quantization_config(act_observer=MinMaxObserver)
    q, _ = quantize(M(), (2, 8), EspNNQuantizer().set_module_type(Gate, minmax))
    mul, sig, fc = one(q, aten.mul.Tensor), one(q, aten.sigmoid.default), one(q, aten.linear.default)
    assert in_qparams(mul, 0) == (1 / 256, -128)
    assert in_qparams(mul, 1) == out_qparams(fc)
    # dequantize <- quantize <- sigmoid: no dequantize -> quantize requantization pair
    assert mul.args[0].args[0].args[0] is sig


# ---- mean / adaptive average pool --------------------------------------------------------


class Means(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return (
            y.mean(dim=[-1, -2]),
            y.mean(dim=(2, 3), keepdim=True),
            F.adaptive_avg_pool2d(y, 1),
            F.adaptive_avg_pool2d(y, 2),  # not global: an average pool (shared qparams)
            y.mean(dim=1),  # one run of adjacent dims: MEAN_HW over [N, C, 1, H*W], own observers
            y.mean(dim=(1, 3)),  # not adjacent: no ESP-NN op, left float
        )


def test_mean_and_global_pool_requantize_with_own_observers():
    model = Means()
    q, calib = quantize(model, (1, 3, 8, 8))
    conv_out = out_qparams(one(q, aten.conv2d.default))
    means = calls(q, aten.mean.dim)
    assert len(means) == 4
    hw_means = [m for m in means if sorted(d % 4 for d in m.args[1]) == [2, 3]]
    assert len(hw_means) == 2
    pools = calls(q, aten.adaptive_avg_pool2d.default)
    global_pool = next(p for p in pools if list(p.args[1]) == [1, 1])
    local_pool = next(p for p in pools if list(p.args[1]) == [2, 2])
    for node in hw_means + [global_pool]:
        assert in_qparams(node) == conv_out
        assert out_qparams(node) != conv_out  # own observer: the mean narrows the range
    assert in_qparams(local_pool) == out_qparams(local_pool) == conv_out
    channel_mean = next(m for m in means if m not in hw_means and list(m.args[1]) == [1])
    assert in_qparams(channel_mean) == conv_out and out_qparams(channel_mean) != conv_out
    (gapped_mean,) = [m for m in means if m not in hw_means and m is not channel_mean]
    assert all(u.target != Q_T for u in gapped_mean.users)
    assert_close_to_float(model, q, calib)


# ---- shared qparams ------------------------------------------------------------------


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 3, padding=1)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        a = F.max_pool2d(F.relu(self.a(x)), 2)
        a = F.avg_pool2d(a, 1)
        a = F.interpolate(a, scale_factor=2, mode="nearest")
        a = F.interpolate(a, scale_factor=0.5, mode="bilinear", align_corners=False)
        a = F.pad(a, (1, 1, 1, 1))[:, :, 1:-1, 1:-1]
        a = self.drop(a)
        b = F.max_pool2d(self.b(x), 2)
        c = torch.cat([a, b], dim=1)
        p, r = torch.split(c, [3, 5], dim=1)
        s, t = torch.chunk(r, 2, dim=2)
        s = s.permute(0, 1, 3, 2).reshape(1, -1)
        t = t.unsqueeze(0).squeeze(0).flatten(1)
        flat = torch.cat([p.flatten(1), s, t], 1)
        return flat.view(1, -1, 8)


@pytest.fixture(scope="module")
def shared_quantized():
    model = Shared()
    q, calib = quantize(model, (1, 3, 8, 8))
    return model, q, calib


SHARED_TARGETS = [
    aten.max_pool2d.default,
    aten.avg_pool2d.default,
    aten.upsample_nearest2d.vec,
    aten.upsample_bilinear2d.vec,
    aten.pad.default,
    aten.slice.Tensor,
    aten.permute.default,
    aten.reshape.default,
    aten.flatten.using_ints,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.view.default,
    aten.dropout.default,
]


def test_data_movement_and_pooling_share_qparams(shared_quantized):
    _, q, _ = shared_quantized
    seen = set()
    for node in calls(q, *SHARED_TARGETS):
        assert in_qparams(node) == out_qparams(node), node.name
        seen.add(node.target)
    assert seen == set(SHARED_TARGETS)
    a_relu = one(q, aten.relu.default)
    assert in_qparams(one(q, aten.upsample_nearest2d.vec)) == out_qparams(a_relu)


def test_concat_parts_share_the_output_qparams(shared_quantized):
    _, q, _ = shared_quantized
    for cat in calls(q, aten.cat.default):
        qp = out_qparams(cat)
        for i in range(len(cat.args[0])):
            dq = cat.args[0][i]
            assert dq.target == DQ_T and (dq.args[1], dq.args[2]) == qp


def test_split_and_chunk_parts_share_the_input_qparams(shared_quantized):
    _, q, _ = shared_quantized
    for split in calls(q, aten.split_with_sizes.default, aten.chunk.default):
        qp = in_qparams(split)
        for part in split.users:
            assert out_qparams(part) == qp


def test_shared_model_close_to_float(shared_quantized):
    model, q, calib = shared_quantized
    assert_close_to_float(model, q, calib)


def test_concat_observes_the_union_of_its_parts():
    # A part with a wider range than the first one must not be clipped by the concat.
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.small, self.big = nn.Linear(4, 4), nn.Linear(4, 4)
            with torch.no_grad():
                self.big.weight.mul_(20.0)

        def forward(self, x):
            return torch.cat([self.small(x), self.big(x)], dim=-1)

    model = M()
    q, calib = quantize(model, (8, 4))
    scale, zp = out_qparams(one(q, aten.cat.default))
    with torch.no_grad():
        widest = max(float(model.big(x).abs().max()) for (x,) in calib)
    assert max(-(-128 - zp), 127 - zp) * scale >= 0.9 * widest
    assert_close_to_float(model, q, calib, rel=0.03)


def test_layout_ops_on_graph_input_are_quantized_from_the_input():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3)

        def forward(self, x):  # [N, 49, 10] -> [N, 1, 10, 49]
            return self.conv(x.unsqueeze(1).transpose(2, 3))

    q, _ = quantize(M(), (1, 49, 10))
    (x,) = [n for n in q.graph.nodes if n.op == "placeholder"]
    assert [u.target for u in x.users if u.op == "call_function"] == [Q_T]
    uns, tr = one(q, aten.unsqueeze.default), one(q, aten.transpose.int)
    assert in_qparams(uns) == out_qparams(uns) == in_qparams(tr) == out_qparams(tr)


def test_layout_op_on_graph_input_feeding_float_stays_float():
    class M(nn.Module):
        def forward(self, x):
            return torch.sigmoid(x), x.reshape(-1)

    q = espnn_quantize(M(), (torch.randn(2, 3),), [(torch.randn(2, 3),)])
    assert is_float_op(one(q, aten.reshape.default))


# ---- global / module-type / module-name configs ---------------------------------------------


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 4, 1)
        self.relu = nn.ReLU()

    def forward(self, x):
        y = self.relu(self.conv(x))
        return F.softmax(F.max_pool2d(y, 2).flatten(1), dim=-1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = ConvReLU()
        self.head = Head()

    def forward(self, x):
        return self.head(self.features(x))


def _float_head_checks(q):
    """Net.head left float, Net.features quantized."""
    features_conv, head_conv = calls(q, aten.conv2d.default)
    assert is_float_op(head_conv), "the head conv must keep float weights and output"
    head_relu = next(r for r in calls(q, aten.relu.default) if r.args[0] is head_conv)
    assert is_float_op(head_relu)
    # shared-qparam ops behind a float producer stay float too
    assert is_float_op(one(q, aten.max_pool2d.default))
    assert is_float_op(one(q, aten.flatten.using_ints))
    assert is_float_op(one(q, aten.softmax.int))
    check_weight_and_bias(q, features_conv, ch_axis=0, out_channels=8)
    assert out_qparams(next(iter(features_conv.users)))[1] == -128  # fused relu


@pytest.mark.parametrize(
    "configure",
    [
        lambda qz: qz.set_module_name("head", None),
        lambda qz: qz.set_module_type(Head, None),
    ],
    ids=["module_name", "module_type"],
)
def test_none_module_config_keeps_conv_relu_and_softmax_float(configure):
    quantizer = EspNNQuantizer()
    configure(quantizer)
    model = Net()
    q, calib = quantize(model, (1, 3, 8, 8), quantizer)
    _float_head_checks(q)
    assert_close_to_float(model, q, calib)


def test_global_none_with_one_module_quantized():
    quantizer = EspNNQuantizer(None).set_module_name("features", get_espnn_quantization_config())
    q, _ = quantize(Net(), (1, 3, 8, 8), quantizer)
    _float_head_checks(q)


def test_none_on_activation_module_prevents_fusion():
    quantizer = EspNNQuantizer().set_module_name("relu", None)
    q, _ = quantize(ConvReLU(), (1, 3, 8, 8), quantizer)
    conv, relu = one(q, aten.conv2d.default), one(q, aten.relu.default)
    out_qparams(conv)  # the conv's own output observer
    assert is_float_op(relu)


def test_innermost_module_name_wins():
    quantizer = (
        EspNNQuantizer()
        .set_module_name("head", None)
        .set_module_name("head.conv", get_espnn_quantization_config())
    )
    q, _ = quantize(Net(), (1, 3, 8, 8), quantizer)
    _, head_conv = calls(q, aten.conv2d.default)
    check_weight_and_bias(q, head_conv, ch_axis=0, out_channels=4)
    out_qparams(head_conv)  # head.relu is float: nothing to fuse
    head_relu = next(r for r in calls(q, aten.relu.default) if source(r.args[0]) is head_conv)
    assert is_float_op(head_relu)
    assert is_float_op(one(q, aten.softmax.int))


def test_module_type_config_observer_choice():
    minmax = get_espnn_quantization_config(act_observer=MinMaxObserver)
    quantizer = EspNNQuantizer().set_module_type(Head, minmax)
    gm = torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),)).module()
    prepared = prepare_pt2e(gm, quantizer)
    kinds = {type(m).__name__ for m in prepared.modules()}
    assert {"MinMaxObserver", "HistogramObserver", "PerChannelMinMaxObserver"} <= kinds


# ---- QAT (prepare/convert: tests/aot/test_quantizer_qat.py) -----------------------------


def test_mixed_qat_and_ptq_configs_rejected():
    quantizer = EspNNQuantizer().set_module_name("head", get_espnn_quantization_config(is_qat=True))
    gm = torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),)).module()
    with pytest.raises(ValueError, match="is_qat"):
        prepare_pt2e(gm, quantizer)


# ---- misuse and validation ---------------------------------------------------------------


def test_training_mode_export_rejected_for_ptq():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train()
    gm = torch.export.export(model, (torch.randn(2, 4),)).module()
    with pytest.raises(RuntimeError, match=r"dropout.*training mode.*model\.eval\(\)"):
        prepare_pt2e(gm, EspNNQuantizer())


def test_unexported_module_rejected():
    model = ConvReLU().eval()
    with pytest.raises(TypeError, match=r"torch\.export"):
        prepare_pt2e(torch.fx.symbolic_trace(model), EspNNQuantizer())
    with pytest.raises(TypeError, match=r"torch\.export"):
        EspNNQuantizer().annotate(model)
    ep = torch.export.export(model, (torch.randn(1, 3, 8, 8),))
    with pytest.raises(TypeError, match=r"\.module\(\)"):
        EspNNQuantizer().annotate(ep)


def _spec(**overrides):
    base = dict(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver,
    )
    base.update(overrides)
    return QuantizationSpec(**base)


def test_configs_outside_the_scheme_rejected():
    good = get_espnn_quantization_config()
    with pytest.raises(ValueError, match="int8"):
        uint8 = _spec(dtype=torch.uint8, quant_min=0, quant_max=255)
        EspNNQuantizationConfig(activation=uint8, weight=good.weight)
    with pytest.raises(ValueError, match=r"\[-128, 127\]"):
        EspNNQuantizationConfig(activation=_spec(quant_min=-127), weight=good.weight)
    with pytest.raises(ValueError, match="symmetric"):
        bad_w = _spec(quant_min=-127, quant_max=127, qscheme=torch.per_channel_affine, ch_axis=0)
        EspNNQuantizationConfig(activation=good.activation, weight=bad_w)
    with pytest.raises(ValueError, match="dynamic"):
        EspNNQuantizationConfig(activation=_spec(is_dynamic=True), weight=good.weight)
    with pytest.raises(TypeError, match="EspNNQuantizationConfig"):
        EspNNQuantizer().set_global(object())
    with pytest.raises(TypeError):
        EspNNQuantizer().set_module_name(nn.Conv2d, None)


def test_validate_rejects_foreign_annotations():
    gm = torch.export.export(ConvReLU().eval(), (torch.randn(1, 3, 8, 8),)).module()
    quantizer = EspNNQuantizer()
    quantizer.annotate(gm)
    relu = next(n for n in gm.graph.nodes if n.target == aten.relu.default)
    relu.meta[Q_ANNOTATION_KEY].output_qspec = _spec(dtype=torch.uint8, quant_min=0, quant_max=255)
    with pytest.raises(ValueError, match="relu"):
        quantizer.validate(gm)


# ---- sanity: a small CNN end to end --------------------------------------------------


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU())
        self.pw = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = self.stem(x)
        y = F.relu(y + self.pw(self.dw(y)))
        y = F.max_pool2d(y, 2)
        y = F.adaptive_avg_pool2d(y, 1).flatten(1)
        return F.softmax(self.fc(y), dim=-1)


def test_small_cnn_close_to_float():
    torch.manual_seed(1)
    model = SmallCNN().eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    calib = _inputs((1, 3, 16, 16), n=8, seed=3)
    q, _ = quantize(model, None, calib=calib)
    assert not calls(q, aten.batch_norm.default)
    # every op's result is int8, or it feeds a fused activation directly
    for n in q.graph.nodes:
        if n.op != "call_function" or n.target in (Q_T, DQ_T, DQ_C) or not is_float_op(n):
            continue
        (act,) = n.users
        assert act.target in (aten.relu.default, aten.hardtanh.default), f"{n.name} left float"
        out_qparams(act)
    with torch.no_grad():
        for (x,) in calib:
            torch.testing.assert_close(q(x), model(x), atol=0.02, rtol=0)
