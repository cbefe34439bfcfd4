"""``espnn report FILE.pte``: what a serialized program delegates, each
ESP-NN payload's summary from the device parser, and memory."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import runtime
from ..pte_check import InvalidProgramError, check_pte
from .errors import EXIT_OK, UsageError
from .files import read_bytes
from .progress import warn


def add_parser(sub, parents) -> None:
    p = sub.add_parser("report", parents=parents, help="re-read a .pte: delegates, payload summaries, memory",
                       description="Read a .pte with ExecuTorch's deserializer, parse every EspNNBackend payload "
                       "with the device parser and print per method: partitions, XTS3 ops, arena/scratch bytes, "
                       "MACs, CPU kernel calls and ExecuTorch's planned memory.")
    p.add_argument("pte", type=Path, help="the .pte file")
    p.add_argument("--json", type=Path, help="write the report as JSON (docs/report-schema.json)")
    p.add_argument("--html", type=Path, help="write a self-contained HTML report")
    p.set_defaults(func=run)


def read_pte(path: Path) -> bytes:
    return read_bytes(path)


def read_checked_pte(path: Path) -> bytes:
    """The bytes of a .pte that passed the device's check (pte_check.py),
    which every command runs before anything reads the program: a corrupt
    file is a usage error (exit 2) naming the file and the field."""

    pte = read_pte(path)
    try:
        check_pte(pte, str(path))
    except InvalidProgramError as e:
        raise UsageError(f"{e} (the file is corrupt, or not a program ExecuTorch 1.5 wrote)") from e
    return pte


def load_report(path: Path):
    """(pte bytes, DelegationReport) of a .pte file, errors as UsageError."""
    # lazy: the partition package loads torch and executorch; `espnn --help` must load without them
    from ..partition.report import pte_report

    pte = read_checked_pte(path)
    try:
        return pte, pte_report(pte)
    except ValueError as e:
        raise UsageError(f"{path}: {e} (is it a .pte written by ExecuTorch?)") from e


def run(args: argparse.Namespace) -> int:
    # lazy: document imports the partition package (torch, executorch); `espnn --help` must load without them
    from .document import memory_warnings, print_summary, report_document, report_target, write_outputs

    pte, report = load_report(args.pte)
    warnings = memory_warnings(report, report_target(report))
    for text in warnings:
        warn(text)
    doc = report_document(pte_path=args.pte, pte_bytes=len(pte), report=report,
                          missing_kernels=runtime.missing_host_kernels(pte), warnings=warnings)
    write_outputs(doc, args.json, args.html)
    print_summary(doc, json_path=args.json, html_path=args.html, verbose=args.verbose)
    return EXIT_OK
