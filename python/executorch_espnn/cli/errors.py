"""Exit codes and the one-line error messages of the ``espnn`` command.

Every failure the user can act on is raised as a :class:`CliError` subclass
carrying its exit code and a message that names the file or node at fault and
what to do; :func:`report_error` prints it as one line on stderr (the
traceback only with ``--verbose``). Anything else is an internal error (exit
code 4) and is printed the same way with a hint to rerun with ``--verbose``.
"""

from __future__ import annotations

import sys
import traceback

from ..error_text import one_line

# Documented in docs/cli.md ("Exit codes"); tests/cli check each one.
EXIT_OK = 0
EXIT_VERIFICATION_FAILED = 1  # the .pte ran, but its outputs differ from the reference beyond tolerance
EXIT_USAGE = 2  # bad arguments or unreadable/invalid input (argparse uses 2 as well)
EXIT_LOWERING = 3  # export/quantization/lowering failed, or --strict refused a CPU fallback
EXIT_INTERNAL = 4  # a bug: anything not anticipated above

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_VERIFICATION_FAILED: "verification failed: host outputs differ from the reference beyond tolerance",
    EXIT_USAGE: "usage or input error: bad arguments, missing or invalid file, missing optional package",
    EXIT_LOWERING: "export, quantization or lowering failed, or --strict refused an op left on the CPU",
    EXIT_INTERNAL: "internal error (a bug; rerun with --verbose and report the traceback)",
}


class CliError(Exception):
    """An error with a message meant for the user and an exit code."""

    exit_code = EXIT_INTERNAL


class UsageError(CliError):
    exit_code = EXIT_USAGE


class ProgramError(CliError):
    """The model or program failed: export, quantization, lowering (the
    lowering's own ``LoweringError`` arrives here as its cause), serialization,
    or the host runtime loading or running it."""

    exit_code = EXIT_LOWERING


def report_error(exc: BaseException, verbose: bool, stream=None) -> int:
    """Prints `exc` as one line on stderr (and its traceback when `verbose`);
    returns the exit code."""
    stream = stream or sys.stderr
    if verbose:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=stream)
    if isinstance(exc, CliError):
        print(f"espnn: error: {one_line(exc)}", file=stream)
        return exc.exit_code
    print(f"espnn: internal error: {one_line(exc, typed=True)}"
          + ("" if verbose else " (rerun with --verbose for the traceback)"), file=stream)
    return EXIT_INTERNAL
