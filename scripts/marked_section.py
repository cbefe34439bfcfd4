"""What the generators that own a marked part of a hand-written file share
(gen_kconfig_ops.py: the Kconfig's op switches; gen_lowering_table.py:
docs/lowering.md's op table): the lines between two marker lines are
replaced, the rest of the file is left as it is, and the command line either
rewrites the file or, with --check, exits 1 while it is out of date (what CI
and the tests use)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable


def replaced(text: str, begin: str, end: str, body: str, what: str) -> str:
    """`text` with the lines between the marker lines `begin` and `end` set
    to `body`; `what` names the file in the error."""
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"{what} needs exactly one pair of marker lines:\n{begin}{end}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return head + begin + body + end + tail


def main(argv: list[str] | None, *, doc: str, option: str, default: Path,
         rewrite: Callable[[str], str], stale: str, written: str) -> int:
    """The generator's command line: `option` names the file (default
    `default`), `rewrite` maps its text to what it should be; `stale` is
    printed by --check when they differ, `written` after a rewrite."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only report whether the file is up to date")
    ap.add_argument(option, dest="path", type=Path, default=default)
    args = ap.parse_args(argv)
    text = args.path.read_text()
    want = rewrite(text)
    if want == text:
        return 0
    if args.check:
        print(f"{args.path}: {stale}", file=sys.stderr)
        return 1
    args.path.write_text(want)
    print(f"{args.path}: {written}")
    return 0
