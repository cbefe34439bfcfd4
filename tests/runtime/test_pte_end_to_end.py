""".pte programs through executorch.runtime with the C++ EspNNBackend delegate.

Oracles: the native interpreter (executorch_espnn._native) on the same
payload, and the quantized PyTorch model (convert_pt2e output).
"""

import importlib.metadata
import struct

import pytest

pytest.importorskip("executorch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import executorch_espnn  # noqa: E402
from pte_harness import delegates, lower, output_scales, quantize  # noqa: E402
from executorch_espnn import _native  # noqa: E402
from executorch_espnn.runtime import InputError, compare_with, load_program, run_pte  # noqa: E402
from executorch_espnn.models import TinyCNN  # noqa: E402


def _calibration(shape, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g),) for _ in range(n)]


@pytest.mark.smoke
def test_backend_registered_on_import():
    from executorch.runtime import Runtime

    assert executorch_espnn._et_backend is not None, executorch_espnn.ET_BACKEND_ERROR
    assert executorch_espnn._et_backend.BACKEND_NAME == "EspNNBackend"
    assert "EspNNBackend" in Runtime.get().backend_registry.registered_backend_names
    # Built against the executorch that is installed (the package pins it).
    assert executorch_espnn._et_backend.EXECUTORCH_VERSION == importlib.metadata.version("executorch")


# -- a fully delegated CNN -------------------------------------------------------
@pytest.fixture(scope="module")
def cnn():
    torch.manual_seed(0)
    shape = (1, 3, 32, 32)
    example = (torch.randn(*shape),)
    q = quantize(TinyCNN(), example, _calibration(shape))
    edge = lower(q, example)
    (lm,) = delegates(edge)
    payload = bytes(lm.processed_bytes)
    pte = edge.to_executorch().buffer
    return q, payload, pte, shape


@pytest.mark.smoke
def test_fully_delegated_cnn_matches_native_and_pytorch(cnn):
    q, payload, pte, shape = cnn
    native = _native.Program(payload)
    summary = native.summary()
    # The partition starts with QUANTIZE and ends with DEQUANTIZE: the
    # delegate's input and output are the model's float tensors.
    assert [summary["tensors"][i]["dtype"] for i in summary["inputs"]] == ["FLOAT32"]
    program = load_program(pte)
    (scale,) = output_scales(q)
    for seed in range(3):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(100 + seed))
        (got,) = run_pte(None, [x], program=program)
        (want_native,) = native.run([x.numpy()])
        assert np.array_equal(got.numpy(), np.asarray(want_native)), "delegate != native interpreter"
        want = q(x)
        assert got.shape == want.shape
        assert (got - want).abs().max().item() <= scale * 1.001, "more than 1 LSB from quantized PyTorch"


def test_compare_with_helper(cnn):
    q, _, pte, shape = cnn
    (scale,) = output_scales(q)
    report = compare_with(pte, q, [torch.randn(*shape)])
    assert report.within(scale * 1.001)


# -- CPU fallback -----------------------------------------------------------------
class CumsumIsland(nn.Module):  # conv | cumsum on the CPU | conv
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return self.c2(torch.cumsum(torch.relu(self.c1(x)), dim=1))


class FloatBranch(nn.Module):  # an int8 conv and a float-only sin branch
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.c(x)), torch.sin(x) * 2


class LinearLstm(nn.Module):  # delegated linear, LSTM on the CPU
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.lstm = nn.LSTM(16, 12, batch_first=True)

    def forward(self, x):
        return self.lstm(torch.relu(self.fc(x)))[0]


@pytest.mark.parametrize("model_cls, shape, n_delegates", [
    (CumsumIsland, (1, 3, 8, 8), 2),
    (FloatBranch, (1, 3, 8, 8), 1),
    (LinearLstm, (1, 5, 16), 1),
])
def test_cpu_fallback_programs_match_pytorch(model_cls, shape, n_delegates):
    torch.manual_seed(1)
    example = (torch.randn(*shape),)
    q = quantize(model_cls(), example, _calibration(shape))
    edge = lower(q, example)
    assert len(delegates(edge)) == n_delegates
    pte = edge.to_executorch().buffer
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(7))
    got = run_pte(pte, [x])
    want = q(x)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w, scale in zip(got, want, output_scales(q)):
        assert g.shape == w.shape
        # int8 outputs: 1 LSB (float rounding on the CPU island may flip one
        # step); float outputs: float tolerance.
        tol = scale * 1.001 if scale is not None else 1e-5
        assert (g - w).abs().max().item() <= tol


@pytest.mark.parametrize("model_cls, shape", [
    (TinyCNN, (1, 3, 32, 32)),
    (CumsumIsland, (1, 3, 8, 8)),
    (FloatBranch, (1, 3, 8, 8)),
    (LinearLstm, (1, 5, 16)),
])
def test_operator_library_program_equals_the_delegate_byte_for_byte(model_cls, shape):
    """The same quantized program lowered both ways (the delegate; espnn::
    ops, docs/oplib.md), run by ExecuTorch's runtime: the same bytes, with
    the CPU islands and the float branch on portable kernels in both."""
    from executorch_espnn.oplib import to_espnn_oplib
    from executorch_espnn.partition.report import pte_program

    torch.manual_seed(1)
    example = (torch.randn(*shape),)
    q = quantize(model_cls(), example, _calibration(shape))
    ep = torch.export.export(q, example)
    delegate = lower(q, example).to_executorch().buffer
    oplib = to_espnn_oplib(ep).to_executorch().buffer
    program = pte_program(oplib)
    assert all(not plan.delegates for plan in program.execution_plan)
    assert any(op.name.startswith("espnn::quantized_") for plan in program.execution_plan for op in plan.operators)
    gen = torch.Generator().manual_seed(7)
    for _ in range(2):
        x = torch.randn(*shape, generator=gen)
        want, got = run_pte(delegate, [x]), run_pte(oplib, [x])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.numpy().tobytes() == w.numpy().tobytes()


# -- several methods ---------------------------------------------------------------
def test_multi_method_program_runs_every_method():
    from executorch_espnn import to_espnn_edge

    torch.manual_seed(2)
    shape = (1, 3, 8, 8)
    example = (torch.randn(*shape),)
    qa = quantize(CumsumIsland(), example, _calibration(shape))
    qb = quantize(FloatBranch(), example, _calibration(shape, seed=1))
    edge = to_espnn_edge({"island": torch.export.export(qa, example),
                          "branch": torch.export.export(qb, example)})
    assert len(delegates(edge, "island")) == 2 and len(delegates(edge, "branch")) == 1
    # The delegation report is per method (taken before to_executorch(), which
    # rewrites the edge programs in place).
    report = executorch_espnn.delegation_report(edge)
    assert set(report.methods) == {"island", "branch"}
    island, branch = report.methods["island"], report.methods["branch"]
    assert len(island.partitions) == 2 and len(branch.partitions) == 1
    assert all(p.backend == "EspNNBackend" for p in island.partitions + branch.partitions)
    assert island.delegated_ops["aten.convolution.default"] == 2
    assert branch.delegated_ops["aten.convolution.default"] == 1
    assert [c.op for c in island.cpu_ops if "cumsum" in c.op] == ["aten.cumsum.default"]
    assert [c.op for c in branch.cpu_ops if "sin" in c.op] == ["aten.sin.default"]
    assert not any("sin" in c.op for c in island.cpu_ops) and not any("cumsum" in c.op for c in branch.cpu_ops)
    assert set(report.to_dict()) == {"island", "branch"}
    pte = edge.to_executorch().buffer
    # to_executorch() rewrote the edge programs: the report refuses them (it
    # would list memory planning as CPU ops) and pte_report reads the .pte.
    with pytest.raises(ValueError, match="before edge.to_executorch"):
        executorch_espnn.delegation_report(edge)
    from executorch_espnn.partition.report import pte_report
    serialized = pte_report(pte)
    assert {m: len(r.partitions) for m, r in serialized.methods.items()} == {"island": 2, "branch": 1}
    program = load_program(pte)
    assert set(program.method_names) == {"island", "branch"}
    x = torch.randn(*shape)
    for name, q in (("island", qa), ("branch", qb)):
        got = run_pte(None, [x], name, program=program)
        want = q(x)
        want = list(want) if isinstance(want, (list, tuple)) else [want]
        for g, w, scale in zip(got, want, output_scales(q)):
            assert (g - w).abs().max().item() <= (scale * 1.001 if scale is not None else 1e-5), name


# -- errors instead of wrong numbers -----------------------------------------------
def _pte_with_payload(edge, payload):
    """The .pte of `edge` with its (single) delegate's payload replaced."""
    (lm,) = delegates(edge)
    lm._processed_bytes = payload
    return edge.to_executorch().buffer


@pytest.fixture(scope="module")
def small():
    """A conv model lowered at two resolutions: payloads to swap."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.c(x))

    torch.manual_seed(3)
    m = M()
    out = {}
    for hw in (8, 6):
        example = (torch.randn(1, 3, hw, hw),)
        q = quantize(m, example, _calibration((1, 3, hw, hw)))
        out[hw] = (q, example)
    return out


def test_wrong_input_dtype_or_shape_is_an_error(cnn):
    _, _, pte, shape = cnn
    program = load_program(pte)
    # Checked before ExecuTorch sees them (InputError, a ValueError naming the input).
    with pytest.raises(InputError, match="input 0: dtype float64"):
        run_pte(None, [torch.randn(*shape, dtype=torch.float64)], program=program)
    with pytest.raises(InputError, match=r"input 0: shape \(1, 3, 16, 16\)"):
        run_pte(None, [torch.randn(1, 3, 16, 16)], program=program)
    # Channels-last input: converted to the program's layout, the contiguous result.
    x = torch.randn(*shape)
    (ref,) = run_pte(None, [x], program=program)
    with pytest.warns(UserWarning, match="channels-last converted"):
        (got,) = run_pte(None, [x.to(memory_format=torch.channels_last)], program=program)
    assert torch.equal(got, ref)


def test_execute_rejects_a_tensor_that_does_not_match_the_payload(small, capfd):
    # The method hands the delegate an [1,3,8,8] tensor, the payload expects [1,3,6,6].
    q8, ex8 = small[8]
    q6, ex6 = small[6]
    (lm6,) = delegates(lower(q6, ex6))
    pte = _pte_with_payload(lower(q8, ex8), bytes(lm6.processed_bytes))
    with pytest.raises(RuntimeError):
        run_pte(pte, [ex8[0]])
    assert "the payload expects [1,3,6,6]" in capfd.readouterr().err


def test_execute_rejects_a_wrong_dtype_from_the_method(small, capfd):
    # A payload whose input is int8 where the method passes float32.
    from executorch_espnn.xts3_writer import Xts3Writer

    q8, ex8 = small[8]
    w = Xts3Writer()
    a = w.tensor([1, 3, 8, 8], "INT8", scale=0.1, zero_point=0)
    b = w.tensor([1, 3, 8, 8], "FLOAT32")
    w.op("DEQUANTIZE", [a], [b], scale_f32=0.1, zero_point=0)
    w.set_inputs([a])
    w.set_outputs([b])
    pte = _pte_with_payload(lower(q8, ex8), w.to_bytes())
    with pytest.raises(RuntimeError):
        run_pte(pte, [ex8[0]])
    assert "input 0 has dtype Float, the payload expects Char" in capfd.readouterr().err


def test_bumped_format_version_fails_to_load(small, capfd):
    q8, ex8 = small[8]
    edge = lower(q8, ex8)
    (lm,) = delegates(edge)
    payload = bytearray(lm.processed_bytes)
    struct.pack_into("<H", payload, 4, _native.FORMAT_VERSION + 1)
    pte = _pte_with_payload(edge, bytes(payload))
    with pytest.raises(RuntimeError):
        run_pte(pte, [ex8[0]])
    err = capfd.readouterr().err
    assert "Init failed for backend EspNNBackend: 0x30" in err  # Error::DelegateInvalidCompatibility


# -- threads -----------------------------------------------------------------------
def test_two_threads_two_programs_match_serial_runs(cnn, small):
    import threading

    q8, ex8 = small[8]
    jobs = []
    for pte, shape in ((cnn[2], cnn[3]), (lower(q8, ex8).to_executorch().buffer, ex8[0].shape)):
        method = load_program(pte).load_method("forward")
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
        jobs.append((method, x, method.execute([x])[0].clone()))
    mismatches = []

    def worker(method, x, ref):
        for _ in range(200):
            if not torch.equal(method.execute([x])[0], ref):
                mismatches.append(1)

    threads = [threading.Thread(target=worker, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not mismatches


def test_float_input_is_bound_in_place_not_copied(cnn):
    # The lowering makes the QUANTIZE-only float input EXTERNAL: the arena
    # holds no float bytes, and the .pte still matches the native
    # interpreter (test_fully_delegated_cnn_matches_native_and_pytorch).
    _, payload, _, shape = cnn
    s = _native.parse(payload)
    (t,) = s["inputs"]
    assert s["tensors"][t]["flags"] == _native.TENSOR_FLAGS["EXTERNAL"] and s["version"] >= 2
    assert s["arena_bytes"] < 4 * int(np.prod(shape)) + int(np.prod(shape))  # no float copy beside its int8


def test_misaligned_float_input_gives_the_aligned_result(cnn):
    # executorch.runtime copies a user input into the method's planned input
    # buffer, so the delegate binds aligned bytes even for a misaligned feed.
    _, _, pte, shape = cnn
    program = load_program(pte)
    n = int(np.prod(shape))
    raw = torch.zeros(4 * n + 1, dtype=torch.uint8)
    x = torch.randn(*shape)
    raw[1:] = x.view(-1).view(torch.uint8)
    try:
        misaligned = torch.frombuffer(raw.numpy().data, dtype=torch.float32, offset=1, count=n).view(*shape)
    except (ValueError, RuntimeError):
        pytest.skip("torch refuses a misaligned float view on this host")
    assert misaligned.data_ptr() % 4 != 0
    (want,) = run_pte(None, [x], program=program)
    (got,) = run_pte(None, [misaligned], program=program)
    assert torch.equal(got, want)


def test_float_output_is_written_into_the_method_output_not_copied(cnn):
    # The lowering makes the DEQUANTIZE's float graph output EXTERNAL: the
    # delegate binds ExecuTorch's output tensor (Interpreter::BindOutput) and
    # the .pte matches the native interpreter and quantized PyTorch
    # (test_fully_delegated_cnn_matches_native_and_pytorch); the arena saving
    # is tests/memory/test_external_outputs.py's.
    q, payload, pte, shape = cnn
    s = _native.parse(payload)
    (t,) = s["outputs"]
    out = s["tensors"][t]
    assert out["flags"] == _native.TENSOR_FLAGS["EXTERNAL"] and out["offset"] == 0
    assert s["version"] >= _native.EXTERNAL_OUTPUT_MIN_VERSION
    program = load_program(pte)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    (got,) = run_pte(None, [x], program=program)
    (again,) = run_pte(None, [x], program=program)  # the binding holds on every execute
    (want,) = _native.Program(payload).run([x.numpy()])
    assert np.array_equal(got.numpy(), want) and torch.equal(got, again)


def test_a_program_with_quantize_ops_on_the_cpu_runs_in_a_fresh_process(tmp_path):
    """A quantize / dequantize left on portable kernels (here of a 0-dim
    mean, which neither mode lowers) needs ExecuTorch's quantized kernels:
    run_pte registers them, so the program loads in a process that never
    lowered anything (it failed with error 0x14 there)."""
    import subprocess
    import sys

    from executorch_espnn.partition.report import pte_program

    class MeanAll(nn.Module):
        def forward(self, x):
            return torch.mean(x, dim=(0, 1, 2, 3))

    example = (torch.randn(2, 3, 4, 5),)
    q = quantize(MeanAll(), example, _calibration((2, 3, 4, 5)))
    pte = lower(q, example).to_executorch().buffer
    ops = {op.name for plan in pte_program(pte).execution_plan for op in plan.operators}
    assert "quantized_decomposed::quantize_per_tensor" in ops, ops
    path = tmp_path / "mean_all.pte"
    path.write_bytes(pte)
    x = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(5))
    torch.save(x, tmp_path / "x.pt")
    code = ("import sys, torch\n"
            "from executorch_espnn.runtime import run_pte\n"
            f"(y,) = run_pte({str(path)!r}, [torch.load({str(tmp_path / 'x.pt')!r})])\n"
            "assert 'executorch.kernels.quantized' in sys.modules\n"
            "print(repr(float(y)))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert abs(float(r.stdout.strip().splitlines()[-1]) - float(q(x))) <= 1e-6
