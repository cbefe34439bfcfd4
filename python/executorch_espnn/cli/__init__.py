"""The ``espnn`` command: PyTorch model -> verified ``.pte`` and a report.

    espnn compile [MODEL] [-o model.pte] [--calibration SRC] [--target esp32s3|esp32] [--arena-budget 320K]
                  [--schedule auto|layer|fused] [--strict] ...
    espnn report FILE.pte [--json OUT] [--html OUT]
    espnn run FILE.pte --input x.npy ... [--reference out.npy ...]
    espnn bundle FILE.pte|FILE.xts3 ... -o OUT

``python -m executorch_espnn`` is the same command. Reference, exit codes
and the JSON report schema: docs/cli.md. Each subcommand is one module here
(``compile_cmd``, ``report_cmd``, ``run_cmd``, ``bundle_cmd``), with the shared
error handling in ``errors``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings

from .. import __version__
from .errors import EXIT_CODES, EXIT_USAGE, CliError, report_error

SUBCOMMANDS = ("compile", "report", "run", "bundle")


def _module(name: str):
    return importlib.import_module(f"{__name__}.{name}_cmd")


def build_parser() -> argparse.ArgumentParser:

    epilog = "exit codes:\n" + "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items())
    parser = argparse.ArgumentParser(
        prog="espnn", description="Compile PyTorch models for ESP-NN (ExecuTorch EspNNBackend), inspect and run "
        ".pte programs on the host.", epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"espnn {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true",
                        help="show the traceback of an error, the libraries' warnings and (compile, report) every "
                        "op left on the CPU")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        _module(name).add_parser(sub, [common])
    return parser


def _quiet_library_loggers() -> None:
    """torchao logs a warning for each CUDA extension a CPU-only install cannot
    load, torch one for a deprecated pytree registration: noise to a CLI user."""

    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)


def main(argv=None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)  # exits with 2 on a usage error, like every argparse tool
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if not args.verbose:
        _quiet_library_loggers()
    try:
        with warnings.catch_warnings():
            if not args.verbose:  # the libraries' deprecation chatter is not the user's business
                warnings.simplefilter("ignore")
            return args.func(args)
    except KeyboardInterrupt:
        print("espnn: interrupted", file=sys.stderr)
        return 130
    except CliError as e:
        return report_error(e, args.verbose)
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, exit code 4
        return report_error(e, args.verbose)


__all__ = ["main", "build_parser", "SUBCOMMANDS"]
