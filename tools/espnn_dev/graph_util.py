"""Helpers for tests that build small XTS3 graphs with the writer and run them natively, or expect the
native parser to refuse them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn.xts3_writer import Xts3Writer

_DTYPE_NAMES = {np.dtype(np.int8): "INT8", np.dtype(np.int32): "INT32", np.dtype(np.float32): "FLOAT32"}


@dataclass
class Const:
    """An op input that is a constant of the blob (weights, bias, tables)."""

    array: np.ndarray
    scale: float = 0.0
    zero_point: int = 0


@dataclass
class Input:
    """An op input that is a graph input, with its quantization."""

    array: np.ndarray
    scale: float = 0.0
    zero_point: int = 0


@dataclass
class Out:
    """An op output: shape, dtype name and quantization."""

    shape: tuple[int, ...]
    dtype: str = "INT8"
    scale: float = 0.0
    zero_point: int = 0


def build_op(op: str, inputs: list, outputs: list[Out], **params) -> tuple[bytes, list[np.ndarray]]:
    """One-op graph. `inputs` items are Input, Const, a bare ndarray (= Input) or None."""
    w = Xts3Writer()
    graph_inputs, feeds, op_inputs = [], [], []
    for item in inputs:
        if item is None:
            op_inputs.append(None)
            continue
        if isinstance(item, np.ndarray):
            item = Input(item)
        if isinstance(item, Const):
            op_inputs.append(w.constant(item.array, scale=item.scale, zero_point=item.zero_point))
        else:
            arr = np.ascontiguousarray(item.array)
            t = w.tensor(arr.shape, _DTYPE_NAMES[arr.dtype], scale=item.scale, zero_point=item.zero_point)
            graph_inputs.append(t)
            feeds.append(arr)
            op_inputs.append(t)
    outs = [w.tensor(o.shape, o.dtype, scale=o.scale, zero_point=o.zero_point) for o in outputs]
    w.op(op, op_inputs, outs, **params)
    w.set_inputs(graph_inputs)
    w.set_outputs(outs)
    return w.to_bytes(), feeds


def run_op(op: str, inputs: list, outputs: list[Out] | Out, **params):
    """Builds a one-op graph, runs it on the native interpreter and returns its output(s)."""
    single = isinstance(outputs, Out)
    blob, feeds = build_op(op, inputs, [outputs] if single else outputs, **params)
    results = _native.Program(blob).run(feeds)
    return results[0] if single else results


def rejection_message(blob: bytes) -> str:
    """The ValueError message with which the native parser refuses `blob` (fails the test if it loads)."""
    with pytest.raises(ValueError) as info:
        _native.Program(blob)
    return str(info.value)


def expect_rejected(blob: bytes, *fragments: str) -> None:
    """The parser refuses `blob` with a message that contains every fragment."""
    message = rejection_message(blob)
    for f in fragments:
        assert f in message, message
