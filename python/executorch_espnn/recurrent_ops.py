"""``espnn::gru`` and ``espnn::lstm``: nn.GRU / nn.LSTM as one op with one output.

``torch.export`` keeps ``nn.GRU`` as ``aten.gru.input`` (and ``nn.LSTM`` as
``aten.lstm.input``), but ExecuTorch will not keep an op with several outputs
from decomposition (``ops_to_not_decompose`` refuses any op whose schema
returns more than one tensor), so the Edge dialect would unroll the sequence
into about 24 ops per time step. EspNNQuantizer therefore rewrites each
recurrent op it can delegate (zero initial state, unidirectional, the final
state unused or equal to the last output) into one of these ops, whose only
output is the output sequence. Their implementation is PyTorch's own
``aten.gru.input`` / ``aten.lstm.input`` with a zero initial state, so the
quantized model computes exactly what the float one does.

A recurrent op the partitioner does not take is turned back into the ATen op
(``decompose_recurrent``) before ExecuTorch lowers the program, so it runs on
the portable kernels like any other float op.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["GRU", "LSTM", "RECURRENT_OPS", "decompose_recurrent", "gates"]


def _zero_state(input: Tensor, params: list[Tensor], num_layers: int, batch_first: bool) -> Tensor:
    hidden = params[1].shape[1]  # w_hh_l0: [G * H, H]
    if input.dim() == 2:  # unbatched [T, I]
        return input.new_zeros(num_layers, hidden)
    return input.new_zeros(num_layers, input.shape[0 if batch_first else 1], hidden)


def _output_shape(input: Tensor, params: list[Tensor]) -> list[int]:
    return [*input.shape[:-1], params[1].shape[1]]


@torch.library.custom_op("espnn::gru", mutates_args=())
def gru(input: Tensor, params: list[Tensor], has_biases: bool, num_layers: int, batch_first: bool) -> Tensor:
    h0 = _zero_state(input, params, num_layers, batch_first)
    return torch.ops.aten.gru.input(input, h0, params, has_biases, num_layers, 0.0, False, False,
                                    batch_first)[0].contiguous()


@torch.library.custom_op("espnn::lstm", mutates_args=())
def lstm(input: Tensor, params: list[Tensor], has_biases: bool, num_layers: int, batch_first: bool) -> Tensor:
    h0 = _zero_state(input, params, num_layers, batch_first)
    return torch.ops.aten.lstm.input(input, [h0, h0.clone()], params, has_biases, num_layers, 0.0, False, False,
                                     batch_first)[0].contiguous()


@gru.register_fake
def _gru_fake(input, params, has_biases, num_layers, batch_first):
    return input.new_empty(_output_shape(input, params))


@lstm.register_fake
def _lstm_fake(input, params, has_biases, num_layers, batch_first):
    return input.new_empty(_output_shape(input, params))


GRU = torch.ops.espnn.gru.default
LSTM = torch.ops.espnn.lstm.default
RECURRENT_OPS = (GRU, LSTM)


def gates(op) -> int:
    """Gate rows per hidden unit: 3 for GRU (r, z, n), 4 for LSTM (i, f, g, o)."""
    return 3 if op in (GRU, "espnn.gru.default") else 4


def _aten_gru(input, params, has_biases, num_layers, batch_first):
    h0 = _zero_state(input, params, num_layers, batch_first)
    return torch.ops.aten.gru.input(input, h0, params, has_biases, num_layers, 0.0, False, False, batch_first)[0]


def _aten_lstm(input, params, has_biases, num_layers, batch_first):
    h0 = _zero_state(input, params, num_layers, batch_first)
    return torch.ops.aten.lstm.input(input, [h0, h0.clone()], params, has_biases, num_layers, 0.0, False, False,
                                     batch_first)[0]


def has_recurrent(ep) -> bool:
    return any(n.op == "call_function" and n.target in RECURRENT_OPS for n in ep.graph.nodes)


def decompose_recurrent(ep):
    """The ExportedProgram with every espnn::gru / espnn::lstm back as the ATen op
    (which the Edge dialect then decomposes into portable ops)."""
    if not has_recurrent(ep):
        return ep
    return ep.run_decompositions({GRU: _aten_gru, LSTM: _aten_lstm})
