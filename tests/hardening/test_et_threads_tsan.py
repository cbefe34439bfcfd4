"""Concurrent execute() through ExecuTorch's C++ runtime is race-free and
gives the serial results, checked under ThreadSanitizer.

host/tools/et_threads_check.cpp is built with clang -fsanitize=thread: the
runtime, the ESP-NN kernels and the EspNNBackend glue are instrumented
(libexecutorch.so and the CPU kernels of the executorch wheel are not; TSan
still sees their mutexes through its interceptors, but not their memory
accesses). Six threads each load their own instance of one of three programs
(so two instances of every program run at once, next to the other programs)
concurrently, then execute 50 times each and compare every output byte with
a serial run. Every delegate call goes through KernelLock, the delegate's
mutex around ESP-NN. Any TSan report fails the test. The negative control,
two threads invoking ONE interpreter without the lock, must be reported —
so the instrumented runtime is really checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import et_native
from support import toolchain

TSAN = "-O1 -g -fsanitize=thread -fno-omit-frame-pointer"
ENV = {**os.environ, "TSAN_OPTIONS": "exitcode=66 halt_on_error=0 second_deadlock_stack=1"}


def _probe(d: Path) -> str | None:
    if shutil.which("clang++") is None:
        return "clang++ is not installed (apt-get install clang libclang-rt-dev)"
    src = d / "probe.cpp"
    src.write_text("#include <thread>\nint main() { int x = 0; std::thread t([&] { x = 1; }); t.join(); return x - 1; }\n")
    r = subprocess.run(["clang++", *TSAN.split(), str(src), "-o", str(d / "probe")], capture_output=True, text=True)
    if r.returncode != 0:
        return f"clang++ cannot link a -fsanitize=thread program: {r.stderr.strip()[-200:]}"
    r = subprocess.run([str(d / "probe")], capture_output=True, text=True, env=ENV)
    if r.returncode != 0:
        return f"a trivial ThreadSanitizer program does not run here: {r.stderr.strip()[-200:]}"
    return None


@pytest.fixture(scope="module")
def tool(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tsan")
    toolchain.require("cmake", "clang", "clang++")  # apt-get install clang libclang-rt-dev
    why = _probe(d)
    if why:
        pytest.skip(why)
    why = et_native.build(d / "build", ["et_threads_check"], cc="clang", cxx="clang++", flags=TSAN,
                          link_flags="-fsanitize=thread")
    if why:
        pytest.skip(why)
    return d / "build" / "et_threads_check"


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, dict]:
    pytest.importorskip("executorch")
    from espnn_dev import et_programs

    return et_native.write_programs(tmp_path_factory.mktemp("tsan_programs"), et_programs.ALL)


def test_concurrent_execute_is_race_free_and_bit_identical(tool, programs):
    ptes = [p["pte"] for p in programs.values()]
    r = subprocess.run([str(tool), "--threads", "6", "--iterations", "50", *map(str, ptes)],
                       capture_output=True, text=True, env=ENV, timeout=600)
    assert "ThreadSanitizer" not in r.stderr, r.stderr[-6000:]
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "executions=300 failures=0 mismatches=0" in r.stdout, r.stdout


def test_tsan_reports_an_unlocked_shared_interpreter(tool, programs):
    payload = programs["cnn"]["payloads"][0]
    r = subprocess.run([str(tool), "--unsafe-shared-interpreter", str(payload)], capture_output=True,
                       text=True, env=ENV, timeout=300)
    assert "WARNING: ThreadSanitizer: data race" in r.stderr, r.stdout + r.stderr[-3000:]
    assert r.returncode == 66
