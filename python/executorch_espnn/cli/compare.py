"""Comparing a program's outputs with a reference, for ``compile`` and ``run``:
the largest difference per output over all samples, in output steps (LSB)
for int8 outputs and with an absolute + relative bound for float ones.

Every element pair follows ``executorch_espnn.output_diff``: a NaN or an
infinity that the other side does not have is a mismatch, whatever the
tolerance.

Running the programs is ``executorch_espnn.runtime``'s (the ``.pte`` in
ExecuTorch's runtime, or the lowered program with every ESP-NN delegate on the
native runtime when the host's runtime lacks a CPU kernel the ``.pte`` calls).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from ..output_diff import check_tolerance, element_diff


def tolerance_arg(text: str) -> float:
    """argparse type of a tolerance option: a finite number >= 0."""
    try:
        return check_tolerance(float(text), "the tolerance")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0") from None


def as_list(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


@dataclass
class LargestDiffs:
    """Largest difference per output over all samples compared."""

    scales: list  # output step (LSB) per output, None for float outputs
    # Float outputs may also differ by this fraction of the reference element. Two float
    # implementations (ExecuTorch's portable kernels, PyTorch's vectorized ones, whose
    # summation order depends on the host's ISA) round differently by a few ulps, which an
    # absolute bound alone turns into a failure for large values. 0: absolute bound only.
    float_rtol: float = 0.0
    # Both sides NaN at the same element: equal only when this is True (numpy's
    # equal_nan). The product's gates keep the default: a NaN never passes.
    equal_nan: bool = False
    max_abs: list[float] = field(default_factory=list)  # over element pairs that are both finite
    # per float output: max over finite pairs of |got - want| - float_rtol * |want|
    float_excess: list[float] = field(default_factory=list)
    samples: int = 0
    differing: list[int] = field(default_factory=list)  # elements more than half a step (1e-5 for float) apart
    elements: list[int] = field(default_factory=list)
    # per output: element pairs where a NaN/inf is not matched (output_diff's rule), and the first one
    nonfinite: list[int] = field(default_factory=list)
    first_nonfinite: list = field(default_factory=list)  # "sample S index (...): got nan, reference 1" or None

    def add(self, got: list, want: list) -> None:
        if len(got) != len(want):
            raise ValueError(f"{len(got)} outputs, the reference has {len(want)}")
        if not self.max_abs:
            n = len(got)
            self.max_abs, self.differing, self.elements, self.nonfinite = [0.0] * n, [0] * n, [0] * n, [0] * n
            self.float_excess, self.first_nonfinite = [float("-inf")] * n, [None] * n
        for i, (g, w) in enumerate(zip(got, want)):
            if tuple(g.shape) != tuple(w.shape):
                raise ValueError(f"output {i}: shape {tuple(g.shape)}, the reference has {tuple(w.shape)}")
            e = element_diff(g, w, self.equal_nan)
            step = self.scales[i] / 2 if i < len(self.scales) and self.scales[i] else 1e-5
            self.max_abs[i] = max(self.max_abs[i], e.max_abs)
            if g.numel():
                excess = float((e.abs_diff - self.float_rtol * w.double().abs().nan_to_num(posinf=0.0)).max())
                self.float_excess[i] = max(self.float_excess[i], excess)
            self.differing[i] += int((e.abs_diff > step).sum()) + e.nonfinite_mismatches
            self.elements[i] += g.numel()
            if e.nonfinite_mismatches and self.first_nonfinite[i] is None:
                self.first_nonfinite[i] = f"sample {self.samples} {e.first_mismatch}"
            self.nonfinite[i] += e.nonfinite_mismatches
        self.samples += 1

    @property
    def max_lsb(self) -> list:
        return [d / s if s else None for d, s in zip(self.max_abs, self.scales)]

    def passed(self, tolerance_lsb: float, float_atol: float) -> bool:
        # 1.001: a difference of exactly N steps computed in float may land a hair above N.
        # Float outputs: |got - want| <= float_atol + float_rtol * |want| for every element.
        # A NaN/inf mismatch fails whatever the tolerance.
        return all(n == 0 and ((d <= tolerance_lsb * s * 1.001) if s else (e <= float_atol))
                   for d, e, s, n in zip(self.max_abs, self.float_excess, self.scales, self.nonfinite))

    def nonfinite_notes(self) -> list[str]:
        """One phrase per output with NaN/inf mismatches, naming the first one."""
        return [f"output {i}: {n} NaN/inf element(s) not in the reference, first at {first}"
                for i, (n, first) in enumerate(zip(self.nonfinite, self.first_nonfinite)) if n]
