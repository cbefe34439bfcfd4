"""``espnn run FILE.pte --input x.npy ...``: run a program on the host
runtime, save or compare its outputs."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

from .. import runtime
from ..pte_suite import random_inputs
from .compare import LargestDiffs, tolerance_arg
from .errors import EXIT_OK, EXIT_VERIFICATION_FAILED, ProgramError, UsageError, one_line
from .files import load_npy, writable_folder
from .report_cmd import read_checked_pte


def add_parser(sub, parents) -> None:
    p = sub.add_parser("run", parents=parents, help="run a .pte on the host runtime on .npy inputs",
                       description="Run a method of a .pte on ExecuTorch's host runtime (the C++ EspNNBackend "
                       "for ESP-NN partitions, portable kernels for the rest) and print, save or compare its "
                       "outputs. Without --input, random inputs of the method's shapes and dtypes are used.")
    p.add_argument("pte", type=Path, help="the .pte file")
    p.add_argument("--input", "-i", type=Path, action="append", default=[], metavar="X.npy",
                   help="one per method input, in order")
    p.add_argument("--reference", "-r", type=Path, action="append", default=[], metavar="OUT.npy",
                   help="expected output(s), one per method output, in order")
    p.add_argument("--atol", type=tolerance_arg, default=0.0,
                   help="largest absolute difference from --reference that passes, a finite number >= 0 "
                   "(default 0: exact). A NaN or infinity that the reference does not have at the same "
                   "place never passes")
    p.add_argument("--save", type=Path, metavar="DIR", help="write each output as DIR/output_<i>.npy (a new "
                   "or existing folder; existing output_<i>.npy files are replaced)")
    p.add_argument("--method", default="forward", help="method to run (default forward)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    pte = read_checked_pte(args.pte)  # a corrupt file is exit 2 and never reaches ExecuTorch's loader
    if args.save:
        writable_folder(args.save, "--save")  # before running: a bad folder is not found after the work
    try:
        program = runtime.load_program(pte)
    except Exception as e:
        raise ProgramError(f"{args.pte}: the host runtime cannot load it: {one_line(e)} (see ExecuTorch's log "
                            "above; `espnn report` shows what the program needs)") from e
    if args.method not in program.method_names:
        raise UsageError(f"{args.pte} has no method {args.method!r}; it has {sorted(program.method_names)}")
    meta = program.metadata(args.method)
    if args.input:
        if len(args.input) != meta.num_inputs():
            raise UsageError(f"{args.pte} method {args.method} takes {meta.num_inputs()} input(s), --input was "
                             f"given {len(args.input)} time(s)")
        inputs = [load_npy(p, "--input") for p in args.input]
    else:
        inputs = random_inputs(pte, args.method, seed=args.seed, program=program)
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            outputs = runtime.run_pte(None, inputs, args.method, program=program)
    except runtime.InputError as e:
        # Checked before ExecuTorch sees the input: dtype, shape, count.
        where = f"--input {args.input[e.index]}" if args.input and e.index is not None else "input"
        raise UsageError(f"{where}: {e}") from e
    except Exception as e:
        raise ProgramError(f"{args.pte}: running {args.method} failed: {one_line(e)} (ExecuTorch's log above "
                            "says why)") from e
    for note in notes:
        if issubclass(note.category, UserWarning):
            print(f"note: {note.message}")
    for i, o in enumerate(outputs):
        a = o.numpy()
        print(f"output {i}: shape {list(a.shape)} {a.dtype}, min {a.min():.6g}, max {a.max():.6g}, "
              f"argmax {int(a.reshape(-1).argmax())}" if a.size else f"output {i}: empty")
    if args.save:
        for i, o in enumerate(outputs):
            path = args.save / f"output_{i}.npy"
            try:
                np.save(path, o.numpy())
            except OSError as e:
                raise UsageError(f"--save {path}: cannot write it: {e.strerror or e}") from e
        print(f"saved {len(outputs)} output(s) in {args.save}")
    if not args.reference:
        return EXIT_OK
    if len(args.reference) != len(outputs):
        raise UsageError(f"{args.pte} method {args.method} has {len(outputs)} output(s), --reference was given "
                         f"{len(args.reference)} time(s)")
    cmp = LargestDiffs([None] * len(outputs))
    refs = [torch.from_numpy(load_npy(p, "--reference", numeric=True)) for p in args.reference]
    try:
        cmp.add(outputs, refs)
    except ValueError as e:
        raise UsageError(f"--reference: {e}") from e
    ok = cmp.passed(0.0, args.atol)
    diffs = ", ".join(f"output {i}: max abs diff {d:.6g}" + (" over the finite elements" if n else "")
                      for i, (d, n) in enumerate(zip(cmp.max_abs, cmp.nonfinite)))
    notes = "".join(f"; {n}" for n in cmp.nonfinite_notes())
    print(f"{'matches' if ok else 'DIFFERS FROM'} the reference ({diffs}{notes}; atol {args.atol:g})")
    return EXIT_OK if ok else EXIT_VERIFICATION_FAILED

