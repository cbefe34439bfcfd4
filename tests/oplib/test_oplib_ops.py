"""The espnn:: op table: operators.yaml, the runtime's oplib table
(espnn/oplib_ops.h through _native) and the kernels _et_backend registered
with ExecuTorch agree; the torch.library reference runs the runtime's op."""

import numpy as np
import pytest
import torch

from executorch_espnn import _native
from executorch_espnn.oplib import define_ops, oplib_ops, registered_kernels


def test_yaml_runtime_table_and_registered_kernels_agree():
    assert set(oplib_ops()) == set(_native.OPLIB_OPS)
    pytest.importorskip("executorch_espnn._et_backend")
    assert registered_kernels() == {f"espnn::{n}.out" for n in _native.OPLIB_OPS}


def test_reference_is_the_runtime_op_and_its_checks():
    define_ops()
    a = torch.tensor([[-128, -1, 0, 5, 127]], dtype=torch.int8)
    # quantize then dequantize with scale 0.5: x = (q - zp) * scale
    out = torch.ops.espnn.dequantize_per_tensor(a, 0.5, 3)
    assert out.dtype == torch.float32
    assert np.array_equal(out.numpy(), ((a.numpy().astype(np.float32) - 3) * 0.5))
    # the runtime's parameter check (quantization.cpp validate), not a Python copy
    with pytest.raises(ValueError, match="scale_f32 must be a finite positive float"):
        torch.ops.espnn.dequantize_per_tensor(a, -1.0, 0)


def test_the_op_reads_the_callers_bytes_in_place():
    """RunSingleOp copies nothing: the op runs on the caller's buffers
    (ParseModel's tensor_data), so they must meet the arena's alignment; a
    copy into a private arena would have hidden a misaligned input."""
    dq = _native.OPCODES["DEQUANTIZE"]["opcode"]
    q = np.zeros(17, np.int8)
    out = np.zeros(16, np.float32)
    scale_bits = int(np.float32(0.5).view(np.int32))
    params = [scale_bits, 0] + [0] * (len(_native.OPCODES["DEQUANTIZE"]["params"]) - 2)
    _native.run_op(dq, [q[:16]], 1, [out], params)  # a fresh array: 16-byte aligned
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        _native.run_op(dq, [q[1:]], 1, [out], params)
