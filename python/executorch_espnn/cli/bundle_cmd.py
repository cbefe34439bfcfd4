"""``espnn bundle``: the test bundles ``main/`` runs on the board, with the
outputs the host computes — an XTSB bundle of ESP-NN payloads
(``executorch_espnn.bundle``) or an XTSP .pte suite (``executorch_espnn.pte_suite``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import bundle, pte_suite
from .errors import EXIT_OK, UsageError, one_line
from .files import writable_file, write_file
from .report_cmd import read_checked_pte, read_pte


def add_parser(sub, parents) -> None:
    p = sub.add_parser(
        "bundle", parents=parents, help="write board test bundles (XTSB) or .pte suites (XTSP) for main/",
        description="Write what the board runner (main/) consumes, with host-computed expected outputs. "
        "--kind payloads (default): every EspNNBackend payload of the .pte file(s) (and any .xts3 file) as "
        "one XTSB bundle for bundle mode. --kind pte: one .pte with test cases as an XTSP suite for .pte mode.")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE", help=".pte (or, for payloads, .xts3) files")
    p.add_argument("-o", "--output", type=Path, required=True, help="the bundle/suite to write")
    p.add_argument("--kind", choices=("payloads", "pte"), default="payloads")
    p.add_argument("--cases", type=int, default=1, help="random test cases per model (default 1)")
    p.add_argument("--runs", type=int, default=0, help="timed runs per case on the board (0: the runner's default)")
    p.add_argument("--method", default="forward", help="method of the .pte (default forward)")
    p.set_defaults(func=run)


def _payload_cases(files, cases: int, runs: int, method: str):
    # lazy: the partition package loads torch and executorch; `espnn --help` must load without them
    from ..partition.report import pte_payloads

    out = []
    for path in files:
        if path.suffix == ".xts3":
            blobs = [(path.stem, read_pte(path))]
        else:
            data = read_checked_pte(path)
            try:
                blobs = [(f"{path.stem}.{m}.{i}", b) for m, i, backend, b in pte_payloads(data, method)
                         if backend == "EspNNBackend"]
            except ValueError as e:
                raise UsageError(f"{path}: {e} (give .pte or .xts3 files)") from e
            if not blobs:
                raise UsageError(f"{path}: method {method} has no EspNNBackend delegate to bundle")
        for name, blob in blobs:
            for c in range(cases):
                try:
                    out.append(bundle.make_case(f"{name}.{c}"[-bundle.MAX_NAME_BYTES:], blob, seed=c, runs=runs))
                except ValueError as e:
                    raise UsageError(f"{path} ({name}): {one_line(e)}") from e
    return out


def run(args: argparse.Namespace) -> int:
    if args.cases < 1:
        raise UsageError("--cases must be >= 1")
    writable_file(args.output, "--output")  # before the work, not after it
    if args.kind == "payloads":
        cases = _payload_cases(args.files, args.cases, args.runs, args.method)
        data = bundle.write_bundle(cases)
        what = f"XTSB bundle: {len(cases)} case(s)"
    else:
        if len(args.files) != 1:
            raise UsageError("--kind pte takes one .pte (a suite holds one program)")
        pte = read_checked_pte(args.files[0])
        try:
            suite = pte_suite.make_suite(pte, method=args.method, cases=args.cases)
        except Exception as e:
            raise UsageError(f"{args.files[0]}: {one_line(e)}") from e
        data = pte_suite.write_suite(suite)
        what = f"XTSP .pte suite: {len(suite.cases)} case(s) of {args.method}"
    write_file(args.output, data, "--output")
    print(f"wrote {args.output} ({len(data):,} bytes, {what})")
    return EXIT_OK
