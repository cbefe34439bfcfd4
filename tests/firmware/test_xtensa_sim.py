"""The firmware's portable C++ on a real (emulated) Xtensa core.

xtensa-sim (tools/xtensa-sim) cross-compiles with Debian's
gcc-xtensa-lx106 + picolibc and runs under qemu-system-xtensa (-M sim -cpu
lx106). Built here: the whole runtime (parser, interpreter, every op), the
ESP-NN stand-in (or the real ESP-NN ANSI sources from $ESPNN_DIR), the bundle
runner core, the portable platform layer, the ExecuTorch PAL mapping, the
component's hello example, and the host/emulator shell of tests/firmware. The
op-corpus bundle (every XTS3 opcode) is linked into ROM and must verify
bit-exactly against the outputs the x86-64 build computed.

lx106 is the ESP8266's core, not the ESP32-S3's LX7: 32-bit, little-endian,
unaligned 16/32-bit loads trap (exit 109), no SIMD, no FPU. Passing here
proves portable, alignment-safe C++ on Xtensa, not S3 behaviour or speed.
Instruction counts come from QEMU's --icount plugin: they are guest
instructions, NOT cycle counts.

Skipped, with the reason, when the Debian packages are missing; set
ESPNN_REQUIRE_XTENSA=1 (as .ci/run does) to make that a failure instead.
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from executorch_espnn import bundle as B

from . import bundle_mutations as bm
from .conftest import XTENSA_REPORT
from espnn_dev.xtensa_build import RUNTIME, TEST_RUNNER
from .test_bundle_runner_host import misaligned_constant_case, results

def _assert_no_trap(r: subprocess.CompletedProcess):
    """xtensa-sim exits 100 + EXCCAUSE on a CPU exception (109: unaligned
    load/store); 124 is a timeout, 125 a tool failure, 134 abort()."""
    assert r.returncode not in (124, 125, 134), f"exit {r.returncode}: {r.stderr[-2000:]}"
    assert not 100 <= r.returncode < 164, f"CPU exception (exit {r.returncode}): {r.stderr[-2000:]}"


# ------------------------------------------------------------------ tests
def test_platform_selftest_on_xtensa(xtensa, host_runner):
    r = xtensa.run("--selftest")
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-2000:])
    assert "SELFTEST info sizeof(size_t)=4 sizeof(void*)=4" in r.stdout
    host = subprocess.run([str(host_runner), "--selftest"], capture_output=True, text=True)
    strip = lambda s: [ln for ln in s.splitlines() if not ln.startswith("SELFTEST info")]  # noqa: E731
    assert strip(r.stdout) == strip(host.stdout)  # the same checks, all passing on both


def test_op_corpus_runs_in_place_from_rom_bit_exact(xtensa, corpus_cases, host_runner, tmp_path):
    """The corpus bundle linked into ROM (16-byte aligned, like a flash mmap):
    every case parses in place and reproduces the host's outputs bit for bit
    (status=pass means every output byte matched, before and after timing)."""
    r = xtensa.run("--runs=2")
    _assert_no_trap(r)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-2000:])
    recs = B.parse_results(r.stdout)
    assert recs[0]["platform"] == "xtensa-sim" and recs[-1]["passed"] == len(corpus_cases) and recs[-1]["failed"] == 0
    got = results(r.stdout)
    p = tmp_path / "corpus.xtsb"
    p.write_bytes(B.write_bundle(corpus_cases))
    host = results(subprocess.run([str(host_runner), "--runs=2", str(p)], capture_output=True, text=True).stdout)
    for c in corpus_cases:
        assert got[c.name]["status"] == "pass" and got[c.name]["weights"] == "inplace", got[c.name]
        for field in ("ops", "arena", "scratch", "model_bytes", "alloc", "runs"):
            assert got[c.name][field] == host[c.name][field], (c.name, field)
        assert got[c.name]["cycles_mean"] is not None  # CCOUNT read (QEMU's clock, not real cycles)


@pytest.mark.parametrize("misalign", [1, 2, 4])
def test_misaligned_file_bundle_is_copied_not_trapped(xtensa, corpus_cases, tmp_path, misalign):
    p = tmp_path / "corpus.xtsb"
    p.write_bytes(B.write_bundle(corpus_cases))
    r = xtensa.run(f"--misalign={misalign}", "--runs=1", str(p))
    _assert_no_trap(r)
    assert r.returncode == 0, r.stdout[-3000:]
    assert {rec["weights"] for rec in results(r.stdout).values()} == {"copy-align"}


def test_unaligned_int32_load_traps_on_this_core(xtensa):
    """Control: the emulated core really traps an unaligned 32-bit load
    (EXCCAUSE 9, LoadStoreAlignment -> exit 109), so the alignment tests
    around it mean something."""
    r = xtensa.run("--unaligned-probe")
    assert r.returncode == 109, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "aligned load returned 0x04030201\n"  # the second load never returned
    assert "EXCCAUSE=9 " in r.stderr


def test_misaligned_typed_constant_is_rejected_not_trapped(xtensa, tmp_path):
    case, message = misaligned_constant_case()
    p = tmp_path / "bad.xtsb"
    p.write_bytes(B.write_bundle([case]))
    r = xtensa.run(str(p))
    _assert_no_trap(r)
    assert r.returncode == 1
    rec = results(r.stdout)["misaligned_bias"]
    assert (rec["status"], rec["stage"], rec["msg"]) == ("error", "parse", message)


def test_malformed_bundles_get_the_hosts_verdicts(xtensa, host_runner, tmp_path):
    """Header/record mutations and a sample of truncations: the same lines
    as the 64-bit host build (32-bit size_t, byte loads on a trapping core)."""
    muts = [m for m in bm.mutations() if not m.name.startswith("trunc_") or int(m.name[6:]) % 23 == 0]
    paths = []
    for m in muts:
        p = tmp_path / f"{m.name}.xtsb"
        p.write_bytes(m.data)
        paths.append(str(p))
    host = bm.parse_multi(subprocess.run([str(host_runner), *paths], capture_output=True, text=True).stdout)
    r = xtensa.run(*paths, timeout=300)
    _assert_no_trap(r)
    got = bm.parse_multi(r.stdout)
    diffs = [f"{Path(p).name}: host {host.get(p)} xtensa {got.get(p)}" for p in paths if got.get(p) != host.get(p)]
    assert not diffs, "\n".join(diffs[:10])
    assert len(paths) > 50


def test_mismatch_and_out_of_memory_lines_match_the_host(xtensa, host_runner, corpus_cases, tmp_path):
    import numpy as np

    wrong = B.BundleCase("wrong", corpus_cases[0].model, corpus_cases[0].inputs,
                         [e.copy() for e in corpus_cases[0].expected])
    wrong.expected[0].reshape(-1)[5] += np.float32(0.5)
    p = tmp_path / "neg.xtsb"
    p.write_bytes(B.write_bundle([wrong, *corpus_cases[1:]]))
    for args in ([str(p)], ["--alloc-limit=3000", str(p)]):
        x = xtensa.run(*args)
        h = subprocess.run([str(host_runner), *args], capture_output=True, text=True)
        _assert_no_trap(x)
        strip = lambda s: {k: {f: v for f, v in rec.items() if not f.startswith(("us_", "cycles_"))}  # noqa: E731
                           for k, rec in results(s).items()}
        assert strip(x.stdout) == strip(h.stdout)
        assert x.returncode == h.returncode == 1


def test_hello_example_on_xtensa(xtensa, host_runner):
    want = re.compile(r"espnn hello: ops=3 arena=\d+ scratch=\d+ out=\[0\.500 0\.750 1\.000 1\.250\]\n")
    r = xtensa.run("--hello")
    assert r.returncode == 0 and want.fullmatch(r.stdout), (r.stdout, r.stderr)
    h = subprocess.run([str(host_runner), "--hello"], capture_output=True, text=True)
    assert h.stdout == r.stdout


def test_guest_instruction_counts_per_case(xtensa, corpus_cases, tmp_path):
    """Guest instructions of one timed run per case (QEMU --icount plugin;
    NOT cycles: lx106 under QEMU has no pipeline, caches or wait states).
    icount(runs=1) - icount(runs=0) isolates one run: restoring the inputs,
    Invoke, and the bookkeeping around it. With --no-clock nothing printed
    depends on QEMU's clock, so the counts are exactly repeatable."""
    def count(args):
        r = xtensa.run(*args, icount=True)
        assert r.returncode == 0, r.stdout[-2000:]
        return int(re.search(r"guest instructions executed: (\d+)", r.stderr).group(1))

    jobs = []
    for c in corpus_cases:
        p = tmp_path / f"{c.name}.xtsb"
        p.write_bytes(B.write_bundle([c]))
        jobs += [(c.name, k, ["--no-clock", f"--runs={min(k, 1)}", str(p)]) for k in (0, 1, 2)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        counts = dict(zip([(n, k) for n, k, _ in jobs], pool.map(count, [a for _, _, a in jobs])))
    XTENSA_REPORT["icount"].append(
        f"guest instructions per timed run (QEMU lx106, --icount; NOT cycles), kernels: {xtensa.kernels}")
    for c in corpus_cases:
        one, again, none = counts[(c.name, 1)], counts[(c.name, 2)], counts[(c.name, 0)]
        assert one == again, "instruction counts must be repeatable"
        assert one > none
        XTENSA_REPORT["icount"].append(
            f"  {c.name:16s} {one - none:>10,d} per run   ({none:,d} for parse + verify run + process)")


# Sections that count as code/read-only data in the size report.
_SIZE_SECTIONS = re.compile(r"^\.(text|literal|rodata)")


def _map_sizes(map_path: Path) -> dict[str, int]:
    """Bytes of .text/.literal/.rodata input sections per object file, from
    the linker map (after --gc-sections: what the program really contains)."""
    text = map_path.read_text(errors="replace")
    text = text[text.index("Linker script and memory map"):]
    sizes: dict[str, int] = {}
    pending = None
    for line in text.splitlines():
        m = re.match(r"^ (\.\S+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", line)
        if m is None and re.match(r"^ \.\S+$", line):
            pending = line.strip()
            continue
        if m is None and pending:
            m2 = re.match(r"^\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", line)
            sec, pending = pending, None
            if m2 is None:
                continue
            size, obj = int(m2.group(1), 16), m2.group(2)
        elif m is not None:
            sec, size, obj = m.group(1), int(m.group(2), 16), m.group(3)
            pending = None
        else:
            continue
        if _SIZE_SECTIONS.match(sec):
            sizes[obj] = sizes.get(obj, 0) + size
    return sizes


def test_code_size_at_Os(xtensa):
    """Code + read-only data of the runtime built with -Os for Xtensa
    (lx106, -mlongcalls, gc-sections), per part, from the linker map."""
    sizes = _map_sizes(xtensa.elf_os.with_suffix(".map"))
    index = {f"u{i + 1}_{s.stem}.o": s for i, s in enumerate(xtensa.sources)}
    groups = {"runtime (parser, interpreter, ops)": 0, "runtime: .pte check + portable PAL": 0,
              "test runner (bundle, .pte suite)": 0, "ESP-NN kernels": 0, "test shell + hello": 0,
              "libc/libm/libgcc/soft-float + sim kit": 0}
    for obj, n in sizes.items():
        src = index.get(Path(obj).name)
        if src is None:
            groups["libc/libm/libgcc/soft-float + sim kit"] += n
        elif src.parent == TEST_RUNNER / "src":
            groups["test runner (bundle, .pte suite)"] += n
        elif src.parent == RUNTIME / "src" and src.name.startswith(("platform", "pte_check")):
            groups["runtime: .pte check + portable PAL"] += n
        elif src.parent in (RUNTIME / "src", RUNTIME / "src/ops"):
            groups["runtime (parser, interpreter, ops)"] += n
        elif src.suffix == ".c":
            groups["ESP-NN kernels"] += n
        else:
            groups["test shell + hello"] += n
    XTENSA_REPORT["size"].append("code size at -Os for Xtensa lx106 (.text+.literal+.rodata after gc-sections):")
    for name, n in groups.items():
        XTENSA_REPORT["size"].append(f"  {name:40s} {n:>8,d} bytes")
    runtime = groups["runtime (parser, interpreter, ops)"]
    assert 10_000 < runtime < 250_000, groups
    out = subprocess.run(["xtensa-lx106-elf-size", str(xtensa.elf_os)], capture_output=True, text=True).stdout
    XTENSA_REPORT["size"].append("  whole -Os test program: " + " ".join(out.splitlines()[-1].split()[:3]) +
                                 " (text data bss)")


def test_pte_suite_parser_on_xtensa_matches_the_host(xtensa, host_runner, tmp_path):
    """The .pte mode's container parser (src/pte_suite.cpp) on Xtensa: the
    same view of a valid suite as the host and pte_suite.py, from aligned and
    misaligned addresses (byte loads only, no trap), and the host's exact
    verdict on every malformed suite."""
    from executorch_espnn import pte_suite as S

    from .suite_mutations import inspect_lines, suite_mutations, synthetic_suite

    good = tmp_path / "good.xtsp"
    data = S.write_suite(synthetic_suite())
    good.write_bytes(data)
    for misalign in ("0", "3"):
        r = xtensa.run(f"--misalign={misalign}", "--inspect-suite", str(good))
        _assert_no_trap(r)
        assert r.returncode == 0 and r.stdout.splitlines() == inspect_lines(S.read_suite(data)), r.stdout
    for name, bad, fragment in suite_mutations(data):
        p = tmp_path / f"{name}.xtsp"
        p.write_bytes(bad)
        r = xtensa.run("--inspect-suite", str(p))
        _assert_no_trap(r)
        host = subprocess.run([str(host_runner), "--inspect-suite", str(p)], capture_output=True, text=True)
        assert (r.returncode, r.stdout) == (host.returncode, host.stdout), name
        assert r.returncode == 1 and fragment in r.stdout, (name, r.stdout)
