"""benchmarks/oplib_vs_delegate.py on one small model: every column of both
modes is there in --json and --markdown (not the timings' values)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import oplib_vs_delegate  # noqa: E402


def _evidence(tmp_path, cases):
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps({"device_code_commit": "abcdef0123", "cases": cases}))
    return path


def test_script_measures_both_modes(tmp_path, capsys):
    out = tmp_path / "r.json"
    row = {"build": "esp32s3-pte", "status": "pass"}
    evidence = _evidence(tmp_path, [{**row, "suite": "pte_ds_cnn", "instructions": 5_000_000},
                                    {**row, "suite": "pte_ds_cnn", "instructions": 5_000_002},
                                    {**row, "suite": "pte_ds_cnn", "instructions": 9},
                                    {**row, "suite": "pte_oplib_ds_cnn", "instructions": 6_000_000},
                                    {**row, "suite": "pte_oplib_ds_cnn", "instructions": 7, "status": "error"},
                                    {**row, "suite": "pte_oplib_ds_cnn", "instructions": 8, "build": "esp32s3"}])
    assert oplib_vs_delegate.main(["--models", "ds_cnn", "--runs", "1", "--samples", "1", "--json", str(out),
                                   "--markdown", "--evidence", str(evidence)]) == 0
    doc = json.loads(out.read_text())
    assert "abcdef0" in doc["emulated_s3"] and doc["runs"] == 1
    (r,) = doc["models"]
    assert r["model"] == "ds_cnn" and set(r["modes"]) == {"delegate", "oplib"}
    assert r["outputs_byte_identical"] is True  # ds_cnn: conv, depthwise, pool, linear: all shared ops
    d, o = r["modes"]["delegate"], r["modes"]["oplib"]
    assert d["our_arena_scratch_bytes"] > 0 and o["our_arena_scratch_bytes"] == 0
    assert all(m["planned_memory_bytes"] > 0 and m["pte_bytes"] > 0 and m["host_latency_ms"] > 0 for m in (d, o))
    assert r["latency_ratio_oplib_over_delegate"] > 0
    # the median of the passing .pte-mode rows of each mode's suite
    assert d["s3_instructions"] == 5_000_000 and o["s3_instructions"] == 6_000_000
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(lines) == 4 and lines[0].startswith("| model | mode |")  # header, rule, two modes
    assert "not device speed" in text and "6,000,000" in text


def test_a_mode_that_cannot_lower_is_a_row_and_the_other_is_measured(monkeypatch, capsys):
    import executorch_espnn.oplib

    def refuse(ep):
        raise RuntimeError("no espnn:: op for it")

    monkeypatch.setattr(executorch_espnn.oplib, "to_espnn_oplib", refuse)
    result = oplib_vs_delegate.measure("ds_cnn", runs=1, samples=1)
    assert result["failed"] == {"oplib": "RuntimeError: no espnn:: op for it"}
    assert set(result["modes"]) == {"delegate"} and result["modes"]["delegate"]["host_latency_ms"] > 0
    assert result["latency_ratio_oplib_over_delegate"] is None and result["outputs_byte_identical"] is None
    delegate, failed = oplib_vs_delegate.rows({"models": [result]})
    assert delegate[:2] == ["ds_cnn", "delegate"]
    assert failed[:3] == ["ds_cnn", "oplib", "lowering failed: RuntimeError: no espnn:: op for it"]


def test_a_model_missing_from_the_evidence_says_so(tmp_path):
    assert oplib_vs_delegate.s3_instructions(None, "ds_cnn") == {"delegate": None, "oplib": None}
    result = {"models": [{"model": "m", "failed": {}, "latency_ratio_oplib_over_delegate": 1.0,
                          "outputs_byte_identical": True,
                          "modes": {mode: {"planned_memory_bytes": 1, "our_arena_scratch_bytes": 0, "pte_bytes": 1,
                                           "host_latency_ms": 1.0, "s3_instructions": None}
                                    for mode in ("delegate", "oplib")}}]}
    assert all(r[-1] == "not in the evidence" for r in oplib_vs_delegate.rows(result))
