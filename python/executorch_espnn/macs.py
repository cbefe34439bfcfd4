"""Multiply-accumulates per op, from the tensor shapes the parser read.

Only ops built on a dot product count (conv, depthwise, fully connected,
transposed conv, batch matmul, the gate products of GRU and LSTM); elementwise, pooling and data movement have no MACs in
the usual sense (they are listed with 0).

Both analysis (per-op metrics) and memory (the schedule search's cost) count
MACs; the count lives here, beside both, because analysis builds on memory's
arena rule and memory must not import analysis (tests/test_import_graph.py).
"""

from __future__ import annotations


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def op_macs(summary: dict, op: dict) -> int:
    t = summary["tensors"]
    name = op["op"]
    if name == "CONV2D":
        # every output element: kh * kw * Cin/groups taps (OHWI filter), padding taps included
        _, kh, kw, cg = t[op["inputs"][1]]["shape"]
        return _elements(t[op["outputs"][0]]["shape"]) * kh * kw * cg
    if name == "DEPTHWISE_CONV2D":
        _, kh, kw, _ = t[op["inputs"][1]]["shape"]
        return _elements(t[op["outputs"][0]]["shape"]) * kh * kw
    if name == "FULLY_CONNECTED":
        row_len = t[op["inputs"][1]]["shape"][1]
        return _elements(t[op["outputs"][0]]["shape"]) * row_len
    if name == "BATCH_MATMUL":
        # every output element [.., M, N]: K products (K = the lhs's last dim)
        k = t[op["inputs"][0]]["shape"][-1]
        return _elements(t[op["outputs"][0]]["shape"]) * k
    if name == "TRANSPOSE_CONV2D":
        # PyTorch's scatter: every input pixel through every tap to Cout/groups
        # outputs of Cin/groups inputs each (taps landing outside are counted).
        n, h, w, _ = t[op["inputs"][0]]["shape"]
        cout, kh, kw, cg = t[op["inputs"][1]]["shape"]
        return n * h * w * kh * kw * cout * cg
    if name in ("GRU", "LSTM"):
        # every time step of every sequence: G*H gate rows of I (w_ih) and H (w_hh) products
        # (the first step's w_hh products are skipped, the state being zero: counted anyway)
        b, steps, _ = t[op["inputs"][0]]["shape"]
        rows, in_size = t[op["inputs"][1]]["shape"]
        hidden = t[op["inputs"][2]]["shape"][1]
        return b * steps * rows * (in_size + hidden)
    return 0
