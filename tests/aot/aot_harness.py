"""Runs lowered programs on the host: every delegate payload on the native
interpreter, the rest of the Edge graph in Python, compared with the
convert_pt2e model (the PyTorch oracle)."""

from __future__ import annotations

import torch

from executorch_espnn import _native
from executorch_espnn.runtime import run_edge_program
from executorch_espnn.pipeline import delegate_payloads as payloads  # noqa: F401 - the tests import both from here
from executorch_espnn.pipeline import output_scales  # noqa: F401


def export(converted, example_inputs):
    return torch.export.export(converted, example_inputs)


def run_lowered(edge_manager, inputs, method="forward"):
    return run_edge_program(edge_manager, inputs, method)


# The bound for a chain of quantized layers against the convert_pt2e model. That model
# computes each layer in float (oneDNN/ATen kernels whose accumulation order depends on the
# host's ISA and thread count) before quantizing: one op is within 1 LSB by construction, but
# a 1-step flip in one layer can add to a later layer's rounding, and which elements flip
# moves with the host (measured: DS-CNN's exact share 64.6 % with AVX-512, 70.8 % with
# ATen's scalar kernels). A wiring or parameter error is off by tens of LSB, so 2 still
# catches it; the exact check of a chain is the .pte against the device runtime.
CHAIN_LSB = 2.0


def compare(outputs, references, scales, label="", max_lsb=1.0):
    """Every element within `max_lsb` (1) LSB of the output quantization; returns the exact fractions."""
    fractions = []
    for i, (o, r, s) in enumerate(zip(outputs, references, scales)):
        o, r = o.detach().float(), r.detach().float()
        assert o.shape == r.shape, f"{label} output {i}: shape {tuple(o.shape)} != {tuple(r.shape)}"
        if s is None:
            torch.testing.assert_close(o, r)
            fractions.append(1.0)
            continue
        lsb = (o - r).abs() / s
        exact = float((lsb < 0.5).float().mean())
        print(f"{label} output {i}: {100 * exact:.1f}% exact, max {float(lsb.max()):.2f} LSB")
        assert float(lsb.max()) <= max_lsb + 1e-3, f"{label} output {i}: {float(lsb.max()):.2f} LSB off"
        fractions.append(exact)
    return fractions


def delegate_nodes(edge_manager, method="forward"):
    gm = edge_manager.exported_program(method).graph_module
    return [n for n in gm.graph.nodes if getattr(n.target, "__name__", "") == "executorch_call_delegate"]


def cpu_nodes(edge_manager, method="forward"):
    import operator

    gm = edge_manager.exported_program(method).graph_module
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or getattr(n.target, "__name__", "") == "executorch_call_delegate":
            continue
        if n.target is operator.getitem:
            continue
        out.append(n)
    return out


def op_names(blob):
    """XTS3 op names of a payload, in execution order."""
    return [op["op"] for op in _native.Program(blob).summary()["ops"]]


def lower_and_check(model, example_inputs, quantize, *, label="", strict=True, calibration=None, max_lsb=1.0,
                    **lower_kw):
    """quantize -> export -> to_espnn_edge -> run (delegates natively) -> compare with convert_pt2e
    within `max_lsb` (1 for one op; a chain of layers gets CHAIN_LSB, see there).

    Returns (edge_manager, converted, exact_fractions)."""
    from executorch_espnn import to_espnn_edge

    torch.manual_seed(0)
    converted = quantize(model, example_inputs, calibration)
    edge = to_espnn_edge(export(converted, example_inputs), allow_cpu_fallback=not strict, **lower_kw)
    outputs, calls = run_lowered(edge, list(example_inputs))
    assert calls == len(delegate_nodes(edge))
    refs = converted(*example_inputs)
    refs = list(refs) if isinstance(refs, (list, tuple)) else [refs]
    fractions = compare(outputs, refs, output_scales(converted), label, max_lsb=max_lsb)
    return edge, converted, fractions


# ---- all-codes checks of one delegated op against a float64 oracle -----------------------

def _qparams_of(node):
    return float(node.args[1]), int(node.args[2])


def input_qparams(converted):
    """(scale, zero_point) of each graph input's quantize in a convert_pt2e model, in input order."""
    out = []
    for ph in (n for n in converted.graph.nodes if n.op == "placeholder"):
        (q,) = [u for u in ph.users if "quantize_per_tensor" in str(u.target)]
        out.append(_qparams_of(q))
    return out


def output_qparams(converted):
    """(scale, zero_point) of each graph output's dequantize."""
    out = converted.graph.output_node().args[0]
    return [_qparams_of(n) for n in (out if isinstance(out, (list, tuple)) else [out])]


def all_codes(qp, shape):
    """The 256 int8 codes of quantization `qp` as float32 reals (exactly representable), in `shape`."""
    import numpy as np

    s, zp = qp
    q = np.arange(-128, 128, dtype=np.int64)
    return torch.from_numpy(((q - zp).astype(np.float32) * np.float32(s)).reshape(shape))


def lsb_off(got, want_real, qp):
    """|code of `got` - quantize(want_real)| per element (want_real: float64 numpy)."""
    import numpy as np

    s, zp = qp
    want = np.clip(np.round(want_real / s) + zp, -128, 127)
    got = np.round(got.detach().numpy().astype(np.float64) / s) + zp
    return np.abs(got - want)
