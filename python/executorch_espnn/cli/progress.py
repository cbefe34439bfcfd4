"""Progress feedback on stderr: tqdm when installed, a plain bar otherwise,
and nothing at all when stderr is not a terminal (logs and tests stay clean)."""

from __future__ import annotations

import sys


def _is_tty(stream) -> bool:
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def progress(iterable, total: int | None, desc: str, stream=None):
    """Yields from `iterable`, showing a bar on a terminal."""
    stream = stream or sys.stderr
    if not _is_tty(stream):
        yield from iterable
        return
    try:
        # lazy: tqdm is optional: without it progress is plain lines
        from tqdm import tqdm
    except ImportError:
        yield from _plain_bar(iterable, total, desc, stream)
        return
    yield from tqdm(iterable, total=total, desc=desc, file=stream, leave=False)


def _plain_bar(iterable, total, desc, stream, width: int = 30):
    done = 0
    for item in iterable:
        yield item
        done += 1
        if total:
            filled = width * done // total
            stream.write(f"\r{desc} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        else:
            stream.write(f"\r{desc} {done}")
        stream.flush()
    stream.write("\r" + " " * (len(desc) + width + 24) + "\r")
    stream.flush()


class Stages:
    """One stderr line per stage of a long command ("[2/6] quantizing ...");
    silent with ``quiet``."""

    def __init__(self, total: int, quiet: bool = False, stream=None):
        self.total, self.quiet, self.n = total, quiet, 0
        self.stream = stream or sys.stderr

    def __call__(self, text: str) -> None:
        self.n += 1
        if not self.quiet:
            print(f"[{self.n}/{self.total}] {text}", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(f"      {text}", file=self.stream, flush=True)


def warn(text: str, stream=None) -> None:
    print(f"espnn: warning: {text}", file=stream or sys.stderr, flush=True)
