"""Regenerates the checked-in seed corpora of the fuzz targets:

    PYTHONPATH=<dir with executorch_espnn and its _native> python host/fuzz/make_corpus.py [--out DIR]

host/fuzz/corpus/run/    accepted graphs small enough for fuzz_run (arena and
                         scratch <= 256 KiB): the graphs of tools/espnn_dev/op_corpus.py,
                         the valid blobs of
                         tools/espnn_dev/xts3_mutations.py, and the smallest single-op
                         graphs that tests/ops builds, one per opcode (with the
                         op corpus they are how tests/test_native_m32_asan.py
                         runs every opcode -m32 and under ASan/UBSan), and the
                         accepted blobs of tools/espnn_dev/regression_blobs.py
                         (grouped conv, depthwise multipliers, 16 graph I/O).
host/fuzz/corpus/parse/  the same, plus the hand-built rejected blobs of
                         tools/espnn_dev/regression_blobs.py (the two smallest
                         of each defect class, so the fuzzer starts next to
                         every check that once mattered).

The single-op graphs are collected by running tests/ops under pytest with
_native.Program wrapped to record every blob it is given. The output is
deterministic (fixed test seeds, sorted selection); the script replaces the
directories' contents. `--out DIR` writes DIR/run and DIR/parse instead
(tests/hardening/test_fuzz_seeds.py compares the checked-in seeds with what
`seeds()` makes now).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "host" / "fuzz" / "corpus"
FUZZ_RUN_CAP = 256 << 10  # kMaxFuzzArena / kMaxFuzzScratch in fuzz_run.cpp
PER_OPCODE = 1
REJECTED_PER_CLASS = 2
MAX_SEED_BYTES = 4096

sys.path.insert(0, str(REPO / "tools"))  # espnn_dev: the graphs and blobs the tests use too

import pytest  # noqa: E402
from corpus_dirs import replace_corpora  # noqa: E402  (host/fuzz, the script's own directory)

from executorch_espnn import _native  # noqa: E402


def _accepted(blob: bytes):
    """(opcode names, arena, scratch) if the parser accepts blob, else None."""
    try:
        p = _native.Program(blob)
    except ValueError:
        return None
    ops = tuple(sorted({o["op"] for o in _native.parse(blob)["ops"]}))
    return ops, p.arena_bytes, p.scratch_bytes


class _Recorder:
    """pytest plugin: records every blob handed to _native.Program."""

    def __init__(self):
        self.blobs: list[bytes] = []
        self._orig = _native.Program

    def pytest_sessionstart(self, session):
        orig, blobs = self._orig, self.blobs

        def recording(blob, *a, **kw):
            blobs.append(bytes(blob))
            return orig(blob, *a, **kw)

        _native.Program = recording

    def pytest_sessionfinish(self, session, exitstatus):
        _native.Program = self._orig


def _single_op_graphs() -> list[tuple[str, bytes]]:
    rec = _Recorder()
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "-x", "--no-header", "-o", "addopts=",
                      str(REPO / "tests" / "ops")], plugins=[rec])
    if rc != 0:
        raise SystemExit(f"tests/ops failed (exit {rc}); fix them before regenerating the corpus")
    by_op: dict[str, list[bytes]] = {}
    seen = set()
    for blob in rec.blobs:
        h = hashlib.sha256(blob).digest()
        if h in seen:
            continue
        seen.add(h)
        info = _accepted(blob)
        if info is None or len(info[0]) != 1:
            continue
        ops, arena, scratch = info
        if arena > FUZZ_RUN_CAP or scratch > FUZZ_RUN_CAP:
            continue
        by_op.setdefault(ops[0], []).append(blob)
    out = []
    for op in sorted(by_op):
        # Smallest first (cheap to mutate); ties broken by content for determinism.
        for k, blob in enumerate(sorted(by_op[op], key=lambda b: (len(b), b))[:PER_OPCODE]):
            out.append((f"op_{op}_{k}", blob))
    return out


def seeds(single_op: bool = True) -> dict[str, dict[str, bytes]]:
    """Target -> {file name: blob}; `single_op=False` leaves out the
    single-op graphs of tests/ops (collecting them runs all of tests/ops)."""
    from espnn_dev import op_corpus, regression_blobs
    from espnn_dev import xts3_mutations as xm

    accepted = [(f"graph_{n}", b) for n, b in op_corpus.op_graphs()]
    accepted += [(f"valid_{v.name}", v.blob) for v in xm.valid_blobs()]
    if single_op:
        accepted += _single_op_graphs()
    accepted += [(f"accept_{c.defect}_{c.name}", c.blob) for c in regression_blobs.cases()
                 if c.expect is None and len(c.blob) <= MAX_SEED_BYTES]
    for name, blob in accepted:
        info = _accepted(blob)
        assert info is not None, f"{name} is not accepted by the parser"
    rejected = []
    for defect in regression_blobs.DEFECT_CLASSES:
        small = sorted((c for c in regression_blobs.cases(defect)
                        if c.expect is not None and len(c.blob) <= MAX_SEED_BYTES), key=lambda c: (len(c.blob), c.name))
        rejected += [(f"reject_{defect}_{c.name}", c.blob) for c in small[:REJECTED_PER_CLASS]]

    return {"run": _files(accepted), "parse": _files(accepted + rejected)}


def _files(items: list[tuple[str, bytes]]) -> dict[str, bytes]:
    return {f"{name}.xts3": blob for name, blob in items}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Regenerates the fuzz_parse and fuzz_run seed corpora.")
    ap.add_argument("--out", type=Path, default=CORPUS, help="directory of the run/ and parse/ corpora")
    replace_corpora(ap.parse_args(argv).out, seeds())

if __name__ == "__main__":
    main()
