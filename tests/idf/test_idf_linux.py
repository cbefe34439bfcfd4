"""ESP-IDF's `linux` target: the runner app built by idf.py as a Linux
process (FreeRTOS's POSIX port, ESP-NN's ANSI kernels from the real
espressif/esp-nn) runs a bundle of every XTS3 opcode, verifies every output
against the host runtime's expected outputs (bit-exact) and exits 0."""

from __future__ import annotations

import subprocess

import pytest

from executorch_espnn import bundle as B

from espnn_dev import idf_project

WHY = idf_project.problem("linux")
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")


@pytest.fixture(scope="module")
def linux_runner(tmp_path_factory):
    work = tmp_path_factory.mktemp("idf_linux")
    from espnn_dev import op_corpus

    cases = op_corpus.bundle_cases(runs=3)
    bundle = work / "bundle.bin"
    bundle.write_bytes(B.write_bundle(cases))
    build = idf_project.build(work, "linux", defaults=["CONFIG_ESPNN_RUNNER_BUNDLE_EMBEDDED=y"],
                              defines={"ESPNN_BUNDLE": str(bundle)})
    return build, cases


def test_linux_build_has_no_warnings_in_our_sources(linux_runner):
    build, _ = linux_runner
    assert idf_project.warnings_in_our_sources(build.log) == []
    sdk = build.sdkconfig()
    assert sdk["IDF_TARGET"] == "linux" and sdk["ESPNN_RUNNER_BUNDLE_EMBEDDED"]


def test_linux_app_runs_the_op_corpus_bit_exact(linux_runner):
    build, cases = linux_runner
    r = subprocess.run([str(build.elf)], capture_output=True, text=True, timeout=600)
    run = B.check_run(r.stdout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert run.mode == "bundle" and run.begin["platform"] == "linux"
    assert list(run.results) == [c.name for c in cases]
    assert run.ok, [(k, v.get("status"), v.get("msg")) for k, v in run.results.items() if v.get("status") != "pass"]
    for rec in run.results.values():  # no cycle counter on linux: time only
        assert rec["cycles_mean"] is None and isinstance(rec["us_mean"], float)


def test_linux_app_exits_nonzero_on_a_mismatch(linux_runner, tmp_path):
    """The exit status carries the verdict: one case with a wrong expected
    output fails the process."""
    import numpy as np

    build, cases = linux_runner
    wrong = B.BundleCase("wrong", cases[0].model, cases[0].inputs, [e.copy() for e in cases[0].expected])
    wrong.expected[0].reshape(-1)[5] += np.float32(0.5)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(B.write_bundle([wrong, *cases[1:]]))
    rebuilt = idf_project.build(tmp_path, "linux", defaults=["CONFIG_ESPNN_RUNNER_BUNDLE_EMBEDDED=y"],
                                defines={"ESPNN_BUNDLE": str(bad)})
    r = subprocess.run([str(rebuilt.elf)], capture_output=True, text=True, timeout=600)
    run = B.check_run(r.stdout)
    assert r.returncode == 1 and not run.ok
    assert run.results["wrong"]["status"] == "mismatch"
    assert all(run.results[c.name]["status"] == "pass" for c in cases[1:])


def test_linux_app_runs_a_pte_suite_with_cpu_fallback(tmp_path):
    """.pte mode: ExecuTorch's runtime (built from source by
    scripts/build-executorch-esp.sh --target linux) loads a .pte lowered by
    the executorch wheel, EspNNBackend runs the delegated conv, ExecuTorch's
    portable kernel the sin after it; every case within the suite's tolerance.
    The ExecuTorch build must have selected the suite's CPU operator
    (aten::sin.out): build it with `--suite` of a suite written from
    firmware.pte_models.conv_then_cpu_pte() (docs/firmware.md)."""
    from executorch_espnn import pte_suite as S
    from espnn_dev import pte_models

    pte = pte_models.conv_then_cpu_pte()
    et, why = idf_project.executorch_build("linux", sorted(idf_project.program_operators(pte)))
    if et is None:
        pytest.skip(why)
    suite = S.make_suite(pte, cases=3, runs=3, atol=1e-5)
    path = tmp_path / "suite.xtsp"
    path.write_bytes(S.write_suite(suite))
    build = idf_project.build(tmp_path, "linux", defaults=["CONFIG_ESPNN_RUNNER_MODE_PTE=y",
                                                           "CONFIG_ESPNN_EXECUTORCH_BACKEND=y",
                                                           "CONFIG_ESPNN_PAL_EXECUTORCH=y",
                                                           "CONFIG_ESPNN_RUNNER_BUNDLE_EMBEDDED=y"],
                              defines={"ESPNN_BUNDLE": str(path), "ESPNN_EXECUTORCH_DIR": str(et)})
    assert idf_project.warnings_in_our_sources(build.log) == []
    r = subprocess.run([str(build.elf)], capture_output=True, text=True, timeout=600)
    run = B.check_run(r.stdout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert run.mode == "pte" and list(run.results) == [c.name for c in suite.cases]
    assert run.ok
