"""XTSB test bundles for the board runner (``main/``): XTS3 models with their
inputs and the outputs the host runtime computes for them.

The device checks every output byte against these expected outputs before it
times anything, so a bundle is how "the chip computes exactly what the host
computes" is tested. Byte layout: docs/firmware.md, section "Bundle format";
every magic, size, field offset and limit comes from the device parser's
header (``components/espnn_test_runner/include/espnn/bundle.h``) through
``executorch_espnn._native.BUNDLE_FORMAT``; none is restated here.

    python -m executorch_espnn.bundle demo -o bundle.bin      # the self-check CNN
    python -m executorch_espnn.bundle pack a.xts3 b.xts3 -o bundle.bin
    python -m executorch_espnn.bundle inspect bundle.bin
    python -m executorch_espnn.bundle results monitor.log     # result lines -> JSON

Python API: :class:`BundleCase`, :func:`make_case`, :func:`write_bundle`,
:func:`read_bundle`, :func:`parse_results`, :func:`check_run`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from . import _native
from .container import ContainerWriter, check_cases, unseal
from .record_layout import constants, record_struct

_FORMAT = _native.BUNDLE_FORMAT
# MAGIC is b"XTSB" read little-endian.
(MAGIC, VERSION, HEADER_SIZE, CASE_RECORD_SIZE, PAYLOAD_ALIGNMENT, MAX_CASES, MAX_NAME_BYTES,
 MAX_RUNS) = constants(_FORMAT, "MAGIC", "VERSION", "HEADER_SIZE", "CASE_RECORD_SIZE", "PAYLOAD_ALIGNMENT",
                       "MAX_CASES", "MAX_NAME_BYTES", "MAX_RUNS")
# Byte offsets of the header and case-record fields.
HEADER_FIELDS, CASE_FIELDS = dict(_FORMAT["HEADER_FIELDS"]), dict(_FORMAT["CASE_FIELDS"])
_HEADER = record_struct(HEADER_FIELDS, HEADER_SIZE)
_CASE = record_struct(CASE_FIELDS, CASE_RECORD_SIZE)

_NP_DTYPES = {"INT8": np.int8, "INT32": np.int32, "FLOAT32": np.float32}


@dataclass
class BundleCase:
    """One test case. ``inputs``/``expected`` are the graph inputs/outputs in
    order; each is written as its little-endian bytes. ``expected=None``
    means "what the host runtime computes" (filled in by :func:`make_case`).
    ``runs=0`` lets the runner use its default (Kconfig)."""

    name: str
    model: bytes
    inputs: list[np.ndarray]
    expected: list[np.ndarray] | None = None
    runs: int = 0


def default_inputs(model: bytes, seed: int = 0) -> list[np.ndarray]:
    """Deterministic inputs of the graph's dtypes and shapes: int8 over the
    full range, float32 ~ N(0, 4), int32 over a wide range."""
    summary = _native.parse(model)
    rng = np.random.default_rng(seed)
    feeds = []
    for t in (summary["tensors"][i] for i in summary["inputs"]):
        shape, dtype = tuple(t["shape"]), t["dtype"]
        if dtype == "INT8":
            a = rng.integers(-128, 128, shape).astype(np.int8)
        elif dtype == "FLOAT32":
            a = (rng.standard_normal(shape) * 4).astype(np.float32)
        else:
            a = rng.integers(-(2**31), 2**31, shape).astype(np.int32)
        feeds.append(a)
    return feeds


def make_case(name: str, model: bytes, inputs: Sequence[np.ndarray] | None = None, *, seed: int = 0,
              runs: int = 0) -> BundleCase:
    """A case whose expected outputs are computed by the host build of the
    device runtime (``executorch_espnn._native``): the device must reproduce
    them bit for bit. Raises ValueError if the host parser rejects the model."""
    feeds = list(inputs) if inputs is not None else default_inputs(model, seed)
    expected = [np.asarray(o) for o in _native.run(model, feeds)]
    return BundleCase(name, bytes(model), [np.asarray(f) for f in feeds], expected, runs)


def _le_bytes(arrays: Iterable[np.ndarray]) -> bytes:
    out = bytearray()
    for a in arrays:
        a = np.ascontiguousarray(a)
        out += a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    return bytes(out)


def write_bundle(cases: Sequence[BundleCase]) -> bytes:
    """Serializes cases into an XTSB bundle (16-byte aligned payloads,
    identical models stored once, CRC-32 over everything after the header)."""
    check_cases("bundle", [c.name for c in cases], [c.runs for c in cases], max_cases=MAX_CASES,
                max_name_bytes=MAX_NAME_BYTES, max_runs=MAX_RUNS)
    for c in cases:
        if c.expected is None:
            raise ValueError(f"case {c.name}: no expected outputs (use make_case)")
        if not c.model:
            raise ValueError(f"case {c.name}: empty model")

    table = HEADER_SIZE
    w = ContainerWriter(table + CASE_RECORD_SIZE * len(cases))
    name_offsets = [w.place(c.name.encode("ascii"), 1) for c in cases]
    model_offsets: dict[bytes, int] = {}
    for i, (c, name_off) in enumerate(zip(cases, name_offsets)):
        if c.model not in model_offsets:
            model_offsets[c.model] = w.place(c.model, PAYLOAD_ALIGNMENT)
        ins, exp = _le_bytes(c.inputs), _le_bytes(c.expected)
        w.record(_CASE, table + i * CASE_RECORD_SIZE,
                 (name_off, len(c.name), model_offsets[c.model], len(c.model), w.place(ins, PAYLOAD_ALIGNMENT),
                  len(ins), w.place(exp, PAYLOAD_ALIGNMENT), len(exp), c.runs, 0, 0, 0))
    return w.seal(_HEADER, HEADER_SIZE, PAYLOAD_ALIGNMENT,
                  lambda size, crc: (MAGIC, VERSION, HEADER_SIZE, size, 0, len(cases), table, crc, 0))


def read_bundle(data: bytes) -> list[dict]:
    """Decodes a bundle into case dicts (name, model, inputs, expected, runs)
    with raw payload bytes; checks magic, version, size and CRC. For tools and
    tests; the device's parser (bundle.cpp) is the authority."""
    h = unseal(data, _HEADER, HEADER_FIELDS, magic=MAGIC, version=VERSION, header_size=HEADER_SIZE,
               size_field="bundle_size", noun="bundle")
    count, table = h["case_count"], h["case_table"]
    cases = []
    for i in range(count):
        r = _CASE.unpack_from(data, table + i * CASE_RECORD_SIZE)
        cases.append({"name": data[r[0]:r[0] + r[1]].decode("ascii"), "model": data[r[2]:r[2] + r[3]],
                      "inputs": data[r[4]:r[4] + r[5]], "expected": data[r[6]:r[6] + r[7]], "runs": r[8],
                      "model_offset": r[2]})
    return cases


# ----------------------------------------------------------------- result lines
_RESULT_PREFIXES = ("ESPNN_BEGIN", "ESPNN_RESULT", "ESPNN_END", "ESPNN_BUNDLE_ERROR", "ESPNN_SUITE_ERROR")


def _value(v: str):
    if re.fullmatch(r"\d+", v):
        return int(v)
    if re.fullmatch(r"\d+\.\d+", v):
        return float(v)
    return None if v == "na" else v


def parse_result_line(line: str) -> dict | None:
    """One runner line -> {"kind": "RESULT", "case": ..., ...}; None for other
    lines. Numbers become int/float, "na" None; ``msg`` takes the rest of
    the line. Tolerates a prefix before the record (serial monitors add
    timestamps)."""
    m = re.search(r"(%s) (.*)$" % "|".join(_RESULT_PREFIXES), line.rstrip("\r\n"))
    if not m:
        return None
    rec: dict = {"kind": m.group(1)[len("ESPNN_"):]}
    rest = m.group(2)
    msg = re.search(r"(?:^| )msg=(.*)$", rest)
    if msg:
        rec["msg"] = msg.group(1)
        rest = rest[:msg.start()]
    for tok in rest.split():
        key, sep, val = tok.partition("=")
        if sep:
            rec[key] = val if key == "case" else _value(val)
    return rec


def parse_results(text: str) -> list[dict]:
    """Every runner record in a console log, in order."""
    return [r for r in map(parse_result_line, text.splitlines()) if r is not None]


@dataclass
class RunLog:
    """One complete runner session (bundle or .pte mode) from a console log."""

    begin: dict
    results: dict[str, dict]  # case name -> its ESPNN_RESULT record, in order
    end: dict

    @property
    def mode(self) -> str:
        return self.begin.get("mode", "bundle")

    @property
    def ok(self) -> bool:
        return self.end.get("failed") == 0 and all(r.get("status") == "pass" for r in self.results.values())

    def failures(self) -> list[dict]:
        return [r for r in self.results.values() if r.get("status") != "pass"]


def check_run(text: str) -> RunLog:
    """The last complete runner session in a console log (a board that
    resets prints from the start again), checked for consistency: one
    ESPNN_BEGIN, one ESPNN_RESULT per case with unique names, an ESPNN_END
    whose counts match. A bundle/suite that did not parse (ESPNN_BUNDLE_ERROR
    / ESPNN_SUITE_ERROR) and a log without END (crash, watchdog reset, a
    timeout that cut the log) raise ValueError saying which."""
    recs = parse_results(text)
    starts = [i for i, r in enumerate(recs) if r["kind"] in ("BEGIN", "BUNDLE_ERROR", "SUITE_ERROR")]
    if not starts:
        raise ValueError("no ESPNN_BEGIN line: the runner did not start (wrong app, port or baud rate?)")
    session = recs[starts[-1]:]
    first = session[0]
    if first["kind"] != "BEGIN":
        raise ValueError(f"the runner rejected the {'suite' if first['kind'] == 'SUITE_ERROR' else 'bundle'}: "
                         f"{first.get('msg', '?')}")
    ends = [r for r in session if r["kind"] == "END"]
    if not ends:
        raise ValueError(f"no ESPNN_END after ESPNN_BEGIN ({len([r for r in session if r['kind'] == 'RESULT'])} of "
                         f"{first.get('cases')} results): the board crashed, reset or the log was cut")
    end = ends[0]
    results: dict[str, dict] = {}
    for r in session[:session.index(end)]:
        if r["kind"] != "RESULT":
            continue
        if r.get("case") in results:
            raise ValueError(f"case {r.get('case')} reported twice in one session")
        results[r.get("case")] = r
    passed = sum(r.get("status") == "pass" for r in results.values())
    counts = (first.get("cases"), end.get("cases"), end.get("passed"), end.get("failed"))
    if counts != (len(results), len(results), passed, len(results) - passed):
        raise ValueError(f"inconsistent session: BEGIN cases={counts[0]}, END cases/passed/failed={counts[1:]}, "
                         f"{len(results)} result lines of which {passed} pass")
    return RunLog(first, results, end)


# ----------------------------------------------------------------- CLI
def _demo_cases(runs: int) -> list[BundleCase]:
    from . import selfcheck

    blob = selfcheck.build(np.random.default_rng(2026))[0]
    return [make_case("selfcheck_cnn", blob, seed=1, runs=runs)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m executorch_espnn.bundle", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="bundle with the self-check CNN")
    d.add_argument("-o", "--output", required=True, type=Path)
    d.add_argument("--runs", type=int, default=0)
    p = sub.add_parser("pack", help="bundle XTS3 files (random inputs, host-computed expected outputs)")
    p.add_argument("models", nargs="+", type=Path)
    p.add_argument("-o", "--output", required=True, type=Path)
    p.add_argument("--runs", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    i = sub.add_parser("inspect", help="list a bundle's cases")
    i.add_argument("bundle", type=Path)
    r = sub.add_parser("results", help="runner result lines of a console log as JSON")
    r.add_argument("log", type=Path)
    args = ap.parse_args(argv)

    if args.cmd in ("demo", "pack"):
        if args.cmd == "demo":
            cases = _demo_cases(args.runs)
        else:
            cases = [make_case(re.sub(r"[^A-Za-z0-9_.-]", "_", m.stem)[:MAX_NAME_BYTES], m.read_bytes(),
                               seed=args.seed + k, runs=args.runs) for k, m in enumerate(args.models)]
        data = write_bundle(cases)
        args.output.write_bytes(data)
        print(f"wrote {args.output}: {len(cases)} case(s), {len(data)} bytes")
    elif args.cmd == "inspect":
        for c in read_bundle(args.bundle.read_bytes()):
            print(f"{c['name']}: model {len(c['model'])} B at {c['model_offset']}, inputs {len(c['inputs'])} B, "
                  f"expected {len(c['expected'])} B, runs {c['runs'] or 'default'}")
    else:
        json.dump(parse_results(args.log.read_text(errors="replace")), sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
