"""The console-log parser the board tests (tests/board) and
`python -m executorch_espnn.bundle results` use, fed with what the runner
shells really print: bundle_runner (tests/firmware/stdio_runner.cpp, the
portable core main/ runs in bundle mode) and pte_runner (components/espnn_test_runner/src/pte_runner.cpp
built on the host). Serial monitors add timestamps and CRLF; boards reset and
print a session twice; a crash cuts the log."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from executorch_espnn import bundle as B


@pytest.fixture(scope="module")
def bundle_log(host_runner, corpus_cases, tmp_path_factory) -> tuple[str, list[str]]:
    d = tmp_path_factory.mktemp("log")
    cases = corpus_cases[:6]
    bad = B.BundleCase("wrong", cases[0].model, cases[0].inputs,
                       [e.copy() for e in cases[0].expected])
    bad.expected[0].reshape(-1).view(np.uint8)[0] ^= 1  # one bit of the first element
    (d / "b.xtsb").write_bytes(B.write_bundle([*cases, bad]))
    r = subprocess.run([str(host_runner), "--runs=1", str(d / "b.xtsb")], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    return r.stdout, [c.name for c in cases]


def test_check_run_reads_the_runner_session(bundle_log):
    out, names = bundle_log
    run = B.check_run(out)
    assert run.mode == "bundle" and run.begin["platform"] == "host" and not run.ok
    assert list(run.results) == [*names, "wrong"]
    assert [r["case"] for r in run.failures()] == ["wrong"]
    assert run.results["wrong"]["status"] == "mismatch" and run.results["wrong"]["stage"] == "verify"
    n = len(names) + 1
    assert n >= 4 and run.end == {"kind": "END", "v": 1, "cases": n, "passed": n - 1, "failed": 1}


def test_monitor_prefixes_crlf_and_resets(bundle_log):
    out, names = bundle_log
    lines = out.splitlines()
    noisy = "\r\n".join(f"[12:00:{i:02d}.123] {ln}" for i, ln in enumerate(lines))
    # boot chatter, a first session cut by a reset, then the full session
    log = "ets Jun  8 2016 00:22:57\r\nrst:0x1 (POWERON_RESET)\r\n" + "\r\n".join(lines[:3]) + "\r\n" + noisy
    run = B.check_run(log)
    assert len(run.results) == len(names) + 1 and run.end["failed"] == 1
    assert B.check_run("\n".join(lines)).results == run.results


def test_a_cut_log_or_rejected_bundle_is_an_error(bundle_log, host_runner, tmp_path):
    out, names = bundle_log
    lines = out.splitlines()
    with pytest.raises(ValueError, match=rf"no ESPNN_END .*\(3 of {len(names) + 1} results\)"):
        B.check_run("\n".join(lines[:4]))
    with pytest.raises(ValueError, match="did not start"):
        B.check_run("rst:0x1\nhello\n")
    with pytest.raises(ValueError, match="reported twice"):
        B.check_run("\n".join([lines[0], lines[1], lines[1], *lines[2:]]))
    (tmp_path / "bad.xtsb").write_bytes(b"XTSB" + b"\0" * 60)
    r = subprocess.run([str(host_runner), str(tmp_path / "bad.xtsb")], capture_output=True, text=True)
    with pytest.raises(ValueError, match="rejected the bundle: "):
        B.check_run(r.stdout)


def test_pte_runner_session(pte_runner, pte, tmp_path):
    """.pte mode lines of components/espnn_test_runner/src/pte_runner.cpp (host build) and a suite the
    runner rejects."""
    from executorch_espnn import pte_suite as S

    suite = S.make_suite(pte, cases=2, runs=1)
    (tmp_path / "s.xtsp").write_bytes(S.write_suite(suite))
    r = subprocess.run([str(pte_runner), str(tmp_path / "s.xtsp")], capture_output=True, text=True)
    run = B.check_run(r.stdout)
    assert run.mode == "pte" and run.ok and list(run.results) == ["case0", "case1"]
    (tmp_path / "bad.xtsp").write_bytes(b"XTSP" + b"\0" * 60)
    r = subprocess.run([str(pte_runner), str(tmp_path / "bad.xtsp")], capture_output=True, text=True)
    with pytest.raises(ValueError, match="rejected the suite: suite header"):
        B.check_run(r.stdout)
