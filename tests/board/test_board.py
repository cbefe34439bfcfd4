"""On a board: bundles and .pte suites generated here, run by main/, every
case bit-exact (or within its tolerance) before it is timed. See conftest.py
for how to run; skipped with the reason when no board is attached. These
tests have never run (no board was available)."""

from __future__ import annotations

import pytest

from executorch_espnn import bundle as B

pytestmark = pytest.mark.board


def _report(run: B.RunLog) -> str:
    return "\n".join(f"{r['case']}: {r.get('status')} {r.get('stage', '')} {r.get('msg', '')}"
                     for r in run.failures())


def bundle_cases() -> list[B.BundleCase]:
    """What the board runs in bundle mode: every XTS3 opcode (the demo
    bundle's self-check CNN is the corpus's first case; adding both gave two
    cases of one name, which write_bundle refuses)."""
    from espnn_dev import op_corpus

    return op_corpus.bundle_cases(runs=5)


def test_bundle_runs_bit_exact_on_the_board(board, tmp_path):
    board.require_mode("bundle")
    cases = bundle_cases()
    board.write_partition(B.write_bundle(cases), tmp_path)
    run = B.check_run(board.run())
    assert run.mode == "bundle" and run.begin["platform"] == board.target
    assert list(run.results) == [c.name for c in cases]
    assert run.ok, _report(run)
    for r in run.results.values():  # timed on the chip's clocks, heap known
        assert isinstance(r["cycles_mean"], int) and isinstance(r["heap_free_min"], int)


def test_pte_suite_runs_on_the_board(board, tmp_path):
    board.require_mode("pte")
    pytest.importorskip("executorch")
    from executorch_espnn import pte_suite as S
    from espnn_dev import pte_models

    # Float output after the CPU part (sin): allow for the chip's libm.
    suite = S.make_suite(pte_models.conv_then_cpu_pte(), cases=3, runs=10, atol=1e-5)
    board.write_partition(S.write_suite(suite), tmp_path)
    run = B.check_run(board.run())
    assert run.mode == "pte" and list(run.results) == [c.name for c in suite.cases]
    assert run.ok, _report(run)
