"""espnn::gru / espnn::lstm (nn.GRU / nn.LSTM, recurrent_ops.py) -> GRU / LSTM, one op per layer.

Each layer is one XTS3 op that loops over the time steps itself, so the
payload and the arena do not grow with the sequence length. The float
weights and biases of the quantized graph are quantized here per gate row
(quant_params.recurrent_params). Between two layers the sequence is int8 at
scale 1/128, zero point 0: a hidden state is in (-1, 1) by construction
(GRU: a convex combination of tanh values and the zero initial state; LSTM:
o * tanh(c)), so that quantization covers every value it can take without an
observer. The first layer reads the input's quantization, the last writes the
output's. An unbatched sequence [T, I] is lowered as [1, T, I].

When the only reader of the output sequence is a select of its last time step
(``y[:, -1]``, ``y[-1]``, or h_n as the quantizer spells it), the last layer
writes that step alone (the op's time dim of 1): the arena then holds one step
instead of the sequence, and the select is lowered with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...quant_params import recurrent_params
from ...recurrent_ops import gates
from ..graph import Unsupported, op_name, single_user, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, is_dq, output_spec
from ..registry import register
from ..values import CONTIG

# The int8 sequence between two layers: covers (-1, 1).
INNER = QParams(1.0 / 128.0, 0)


@dataclass
class RecurrentPlan:
    opcode: str
    in_q: QParams
    out: OutputSpec
    seq_dims: tuple[int, int, int]  # the input as [B, T, I] / [T, B, I]
    batch_first: bool
    layers: list[dict]  # quant_params.recurrent_params of each layer
    layer_q: list[QParams]  # output quantization of each layer


def _float_param(node, cc, what: str) -> np.ndarray:
    if not cc.constants.is_constant(node):
        raise Unsupported(f"{what} is not a constant")
    t = cc.constants.tensor(node)
    if t.dtype != torch.float32:
        raise Unsupported(f"{what} is {t.dtype}, not float32")
    return t.detach().numpy().astype(np.float32)


def analyze(node, cc) -> RecurrentPlan:
    x, params, has_biases, num_layers, batch_first = node.args[:5]
    kind = "GRU" if op_name(node) == "espnn.gru.default" else "LSTM"
    g = gates(op_name(node))
    shape = static_shape(x)
    if len(shape) == 2:  # unbatched [T, I]: one sequence
        seq_dims, batch_first = (1, shape[0], shape[1]), True
    elif len(shape) == 3:
        seq_dims = tuple(shape)
    else:
        raise Unsupported(f"{kind} input of rank {len(shape)}")
    per_layer = 4 if has_biases else 2
    if len(params) != per_layer * num_layers:
        raise Unsupported(f"{kind} with {len(params)} weight tensors for {num_layers} layer(s)")
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range:
        raise Unsupported(f"{kind} output with a clamped int8 range")
    layers, layer_q = [], []
    s_in = in_q.scale
    for layer in range(num_layers):
        names = ("w_ih", "w_hh", "b_ih", "b_hh")[:per_layer]
        ws = {n: _float_param(params[layer * per_layer + k], cc, f"{n}_l{layer}") for k, n in enumerate(names)}
        hidden = ws["w_hh"].shape[1]
        if ws["w_hh"].shape != (g * hidden, hidden) or ws["w_ih"].ndim != 2 or ws["w_ih"].shape[0] != g * hidden:
            raise Unsupported(f"{kind} layer {layer}: weights {ws['w_ih'].shape} / {ws['w_hh'].shape}")
        q = out.qparams if layer == num_layers - 1 else INNER
        try:
            layers.append(recurrent_params(ws["w_ih"], ws["w_hh"], ws.get("b_ih"), ws.get("b_hh"), s_in, q.scale))
        except ValueError as e:
            raise Unsupported(f"{kind} layer {layer}: {e}") from e
        layer_q.append(q)
        s_in = q.scale
    if layers[0]["w_ih"].shape[1] != seq_dims[2]:
        raise Unsupported(f"{kind} input size {seq_dims[2]} != w_ih_l0's {layers[0]['w_ih'].shape[1]}")
    return RecurrentPlan(kind, in_q, out, seq_dims, bool(batch_first), layers, layer_q)


def _last_step_reader(node, p: RecurrentPlan, ctx):
    """The select of the output's last time step that alone reads `node`'s int8
    output (through its q/dq pair) in this partition, else None."""
    dq = single_user(p.out.q_node)
    sel = single_user(dq) if dq is not None and is_dq(dq) else None
    if sel is None or op_name(sel) not in ("aten.select.int", "aten.select_copy.int") or sel not in ctx.subgraph:
        return None
    if dq not in ctx.subgraph or p.out.absorbed or len(static_shape(node)) != 3:
        return None
    time = 1 if p.batch_first else 0
    steps = p.seq_dims[time]
    dim, index = sel.args[1], sel.args[2]
    if not isinstance(dim, int) or not isinstance(index, int) or dim % 3 != time or index % steps != steps - 1:
        return None
    return sel


def lower(node, ctx):
    p = analyze(node, ctx)
    last_step = _last_step_reader(node, p, ctx)
    x = ctx.input(node.args[0], layout=CONTIG)
    src = ctx.tensor(x, p.seq_dims)
    tables = None
    out_shape = static_shape(node)
    for layer, (c, q) in enumerate(zip(p.layers, p.layer_q)):
        if tables is None:  # the same two tables serve every layer
            tables = (ctx.constant(c["sigmoid"]), ctx.constant(c["tanh"]))
        hidden = c["w_hh"].shape[1]
        dims = (*p.seq_dims[:2], hidden)
        last = layer == len(p.layers) - 1
        if last and last_step is not None:  # one step: [B, 1, H] / [1, B, H]
            dims = (p.seq_dims[0], 1, hidden) if p.batch_first else (1, p.seq_dims[1], hidden)
            y = ctx.new_value(static_shape(last_step), q, CONTIG, dims=dims)
        else:
            # The last layer's tensor is [B, T, H] even for an unbatched [T, H] output.
            y = ctx.new_value(out_shape if last else dims, q, CONTIG, dims=dims)
        inputs = [src] + [ctx.constant(np.ascontiguousarray(c[k])) for k in
                          ("w_ih", "w_hh", "bias_ih", "bias_hh", "mult_ih", "shift_ih", "mult_hh", "shift_hh")]
        ctx.emit(p.opcode, inputs + list(tables), [y.tensor], batch_first=int(p.batch_first), **c["params"])
        src = y.tensor
    ctx.finish(node, p.out, y)
    if last_step is not None:  # the select is this op's last step: lowered here
        dq = single_user(p.out.q_node)
        spec = output_spec(last_step, ctx, fuse_activation=False)
        ctx.finish(last_step, spec, ctx.requantize(y, spec.qparams))
        ctx.done.update({dq, last_step})


register("espnn.gru.default", "espnn.lstm.default", analyze=analyze, lower=lower)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(150,
               pytorch=("nn.GRU / nn.LSTM (`aten.gru.input` / `aten.lstm.input`): zero initial state, "
                        "unidirectional, no dropout, no LSTM projection, final state unused (or h_n of one "
                        "layer, given as the output's last step). ExecuTorch keeps no op with several outputs "
                        "from decomposition, so EspNNQuantizer rewrites each one into the single-output "
                        "`espnn::gru` / `espnn::lstm` (`recurrent_ops.py`, `quantizer/recurrent.py`; its "
                        "implementation is PyTorch's op); weights stay float and are quantized per gate row "
                        "by `quant_params.recurrent_params`; between layers the sequence is int8 at 1/128. "
                        "One the partitioner refuses is turned back into PyTorch's op and lowered again "
                        "(`to_espnn_edge`)"),
               xts3="GRU, LSTM: one record per layer, looping over the time steps"),
)
