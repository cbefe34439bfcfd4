"""EspNNBackend::execute() allocates nothing — proven on real .pte programs
run by ExecuTorch's C++ runtime (libexecutorch.so of the executorch wheel and
its CPU kernels), not only by construction — and the delegate's memory
lifecycle follows its rules with either memory source.

host/tools/et_delegate_check.cpp replaces malloc/calloc/realloc/
posix_memalign/aligned_alloc/memalign for the whole process (libstdc++'s
operator new and every shared library included; a start-up self-check proves
it) and counts allocations (a) inside each delegate call, bracketed by
ExecuTorch's own DELEGATE_CALL tracer events, and (b) over the whole
Method::execute(). Programs: a fully delegated CNN, an MLP, and a CPU
fallback program (conv | cumsum on the CPU | conv: two delegates). The glue
is built twice: memory from ExecuTorch's runtime allocator (the default) and
from espnn_pal_malloc (the heap_caps choice of Kconfig; on the host
components/espnn_runtime/src/platform_host.cpp), whose blocks destroy() must
free — and a third time with Kconfig's ESPNN_WEIGHTS_COPY_INTERNAL (every
payload copied to espnn_pal_malloc memory at init, processed buffer freed).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import et_native

VARIANTS = {"runtime_allocator": "et_delegate_check", "heap": "et_delegate_check_heap",
            "copy_weights": "et_delegate_check_copy"}


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> dict[str, Path]:
    b = tmp_path_factory.mktemp("et_checks")
    why = et_native.build(b, list(VARIANTS.values()))
    if why:
        pytest.skip(why)
    return {k: b / v for k, v in VARIANTS.items()}


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, dict]:
    pytest.importorskip("executorch")
    from espnn_dev import et_programs

    return et_native.write_programs(tmp_path_factory.mktemp("et_programs"), et_programs.ALL)


def _run(tool: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, timeout=300)


def _fields(line: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", line)}


@pytest.mark.parametrize("variant", VARIANTS)
def test_execute_allocates_nothing(tools, programs, variant):
    runs = 3
    r = _run(tools[variant], "--strict-execute", "--runs", runs, *(p["pte"] for p in programs.values()))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {Path(m.group(1)).stem: _fields(m.group(2))
             for m in re.finditer(r"^program (\S+): (.*)$", r.stdout, re.M)}
    assert set(lines) == set(programs)
    for name, f in lines.items():
        n_delegates = len(programs[name]["payloads"])
        assert n_delegates >= 1
        # The window is not vacuous: every delegate call of every run was seen,
        # and the delegate ran its ops inside it.
        assert f["delegate_calls"] == runs * n_delegates, (name, f)
        assert f["delegate_op_events"] >= f["delegate_calls"], (name, f)
        assert f["delegate_window_allocs"] == 0, (name, f)
        assert f["execute_allocs"] == 0, (name, f)  # the CPU kernels of these programs neither
        assert f["pal_live_after_destroy"] == 0, (name, f)
        if variant == "heap":  # handle + arena (+ scratch) per delegate, from espnn_pal_malloc
            assert f["pal_allocs_at_load"] >= 2 * n_delegates, (name, f)
        elif variant == "copy_weights":  # one payload copy per delegate
            assert f["pal_allocs_at_load"] == n_delegates, (name, f)
        else:
            assert f["pal_allocs_at_load"] == 0, (name, f)


def test_an_allocation_inside_execute_fails_the_check(tools, programs):
    # Negative control: the tracer allocates in every per-op profiling event
    # the delegate emits, i.e. inside EspNNBackend::execute.
    r = _run(tools["runtime_allocator"], "--allocate-in-delegate", programs["cnn"]["pte"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "heap allocations inside EspNNBackend::execute" in r.stderr
    (line,) = re.findall(r"^program .*$", r.stdout, re.M)
    f = _fields(line)
    assert f["delegate_window_allocs"] == f["delegate_op_events"] > 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_processed_buffer_kept_in_place_freed_after_copy(tools, programs, variant):
    payloads = [f for p in programs.values() for f in p["payloads"]]
    args = [a for f in payloads for a in ("--payload", f)]
    r = _run(tools[variant], *args)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [(int(m.group(1)), _fields(m.group(2)))
            for m in re.finditer(r"^payload \S+ offset=(\d+): (.*)$", r.stdout, re.M)]
    assert len(rows) == 2 * len(payloads)
    for offset, f in rows:
        # 16-byte aligned: constants are read in place, the buffer is kept;
        # odd address (or weights copied to RAM): init copies it and frees
        # the processed buffer.
        assert f["processed_freed"] == (offset == 1 or variant == "copy_weights"), (offset, f)
        assert f["pal_live_after_destroy"] == 0, f
        if variant == "heap":
            assert f["runtime_allocator_used"] == 0, f
            assert f["pal_live_after_init"] >= 2 + (offset == 1), f  # handle, arena (, copy)
        elif variant == "copy_weights":
            assert f["pal_live_after_init"] == 1, f  # the copy; the rest from the runtime allocator
            assert f["runtime_allocator_used"] > 0, f
        else:
            assert f["pal_live_after_init"] == 0, f
            assert f["runtime_allocator_used"] > 0, f
