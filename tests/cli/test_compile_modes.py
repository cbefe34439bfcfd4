"""`espnn compile --mode`: the operator library (espnn:: ops, no delegate)
beside the delegate, verified the same way, refusing the delegate-only
options, and byte-identical to the delegate on the same quantized model."""

import json
from pathlib import Path

import pytest
import torch

from cli_harness import error_line, espnn, validate

pytest.importorskip("executorch.runtime")

from executorch_espnn.cli.errors import EXIT_LOWERING, EXIT_USAGE  # noqa: E402
from executorch_espnn.partition.report import pte_program  # noqa: E402
from executorch_espnn.runtime import run_pte  # noqa: E402

MODELS = Path(__file__).parent / "cli_models.py"



def _operators(pte: bytes) -> set[str]:
    return {op.name for plan in pte_program(pte).execution_plan for op in plan.operators}


def _delegates(pte: bytes) -> int:
    return sum(len(plan.delegates) for plan in pte_program(pte).execution_plan)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The MLP of cli_models compiled in both modes (same seed: the same quantized model)."""
    d = tmp_path_factory.mktemp("modes")
    out = {}
    for mode in ("oplib", "delegate"):
        r = espnn("compile", f"{MODELS}:mlp", "--mode", mode, "-o", d / f"{mode}.pte")
        assert r.code == 0, r
        out[mode] = (r, (d / f"{mode}.pte").read_bytes(), json.loads((d / f"{mode}.report.json").read_text()))
    return out


def test_oplib_pte_calls_espnn_ops_and_holds_no_delegate(both):
    r, pte, doc = both["oplib"]
    ops = _operators(pte)
    assert "espnn::quantized_linear" in ops and "espnn::quantize_per_tensor" in ops, ops
    assert not any(op.startswith("quantized_decomposed::") for op in ops), ops
    assert _delegates(pte) == 0
    assert doc["mode"] == {"requested": "oplib", "used": "oplib", "reason": None}
    assert doc["schedule"] is None
    validate(doc)
    assert r.out.startswith("mode: oplib\n") or "\nmode: oplib\n" in r.out


def test_oplib_is_verified_like_the_delegate(both):
    """The host .pte against the lowered program (espnn:: references) and the quantized model."""
    _, _, doc = both["oplib"]
    v = doc["verification"]
    assert v["runtime"] == "pte" and v["passed"]
    assert "espnn:: op" in v["device_runtime"]["reference"]
    assert all(o["max_abs_diff"] == 0 for o in v["device_runtime"]["outputs"])
    assert v["quantized_model"]["outputs"][0]["max_lsb"] is not None


def test_oplib_outputs_equal_the_delegate_byte_for_byte(both):
    _, oplib, _ = both["oplib"]
    _, delegate, _ = both["delegate"]
    assert _delegates(delegate) > 0
    torch.manual_seed(1)
    for _ in range(4):
        x = (torch.randn(1, 16) * 2,)
        (want,) = run_pte(delegate, x)
        (got,) = run_pte(oplib, x)
        assert got.numpy().tobytes() == want.numpy().tobytes()


def test_auto_is_the_delegate_and_says_why(tmp_path):
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "m.pte")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "m.report.json").read_text())
    assert doc["mode"]["requested"] == "auto" and doc["mode"]["used"] == "delegate"
    assert "docs/performance.md" in doc["mode"]["reason"]
    assert _delegates((tmp_path / "m.pte").read_bytes()) > 0
    validate(doc)


@pytest.mark.parametrize("option, word", [(("--arena-budget", "10K"), "--arena-budget"),
                                          (("--schedule", "fused"), "--schedule fused"),
                                          (("--schedule", "layer"), "--schedule layer")])
def test_delegate_only_options_are_refused_in_oplib_mode(tmp_path, option, word):
    r = espnn("compile", "--mode", "oplib", *option, "-o", tmp_path / "m.pte")
    assert r.code == EXIT_USAGE, r
    line = error_line(r)
    assert word in line and "--mode delegate" in line
    assert not (tmp_path / "m.pte").exists()


def test_strict_oplib_refuses_an_op_left_on_portable_kernels(tmp_path):
    r = espnn("compile", f"{MODELS}:cumsum_island", "--mode", "oplib", "--strict", "-o", tmp_path / "m.pte")
    assert r.code == EXIT_LOWERING, r
    line = error_line(r)
    assert "--strict" in line and "aten.cumsum" in line
    assert not (tmp_path / "m.pte").exists()


def test_report_of_an_oplib_pte_says_its_mode(both, tmp_path):
    _, pte, _ = both["oplib"]
    (tmp_path / "o.pte").write_bytes(pte)
    assert espnn("report", tmp_path / "o.pte", "--json", tmp_path / "o.json").code == 0
    doc = json.loads((tmp_path / "o.json").read_text())
    assert doc["mode"] == {"requested": None, "used": "oplib", "reason": None}
    validate(doc)


def test_int8_io_applies_to_oplib_mode(tmp_path):
    r = espnn("compile", f"{MODELS}:mlp", "--mode", "oplib", "--int8-io", "-o", tmp_path / "m.pte")
    assert r.code == 0, r
    pte = (tmp_path / "m.pte").read_bytes()
    doc = json.loads((tmp_path / "m.report.json").read_text())
    assert doc["int8_io"]["inputs"][0]["dtype"] == "int8" and doc["verification"]["passed"]
    ops = _operators(pte)
    assert "espnn::quantized_linear" in ops and "espnn::quantize_per_tensor" not in ops, ops
    (out,) = run_pte(pte, (torch.zeros(1, 16, dtype=torch.int8),))
    assert out.dtype == torch.int8
