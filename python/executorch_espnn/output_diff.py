"""The element rule every output comparison in the product uses (``espnn
compile``'s host verification and ``--tolerance-lsb`` gate, ``espnn run
--reference``, ``runtime.compare_with``).

A NaN or an infinity is compared as what it is, never folded into a maximum
(Python's ``max(0.0, nan)`` is 0.0, which once let an all-NaN output
"match"). Per element pair ``(got, want)``:

* both finite: the absolute difference, judged by the caller's tolerance;
* otherwise they agree only when they are the same value (``inf`` and
  ``inf``, ``-inf`` and ``-inf``) or, with ``equal_nan=True``, when both are
  NaN. Every other pair (a NaN on either side, an infinity against a number
  or against the other infinity) is a *non-finite mismatch*, which fails the
  comparison whatever the tolerance.

This is numpy's ``isclose`` rule for non-finite values. The product's
gates use ``equal_nan=False``: a NaN anywhere never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class ElementDiff:
    """One output against its reference."""

    max_abs: float  # largest |got - want| over the pairs where both are finite (0.0 if none)
    abs_diff: object  # torch float64 tensor: |got - want| where both are finite, 0 elsewhere
    nonfinite_mismatches: int  # pairs that disagree by the non-finite rule
    first_mismatch: str | None  # where the first such pair is, and its values ("index (0, 5): got nan, reference 1")


def element_diff(got, want, equal_nan: bool = False) -> ElementDiff:
    """Compares two tensors of the same shape element by element (see the
    module docstring)."""
    # lazy: torch takes seconds to import; the runtime and the CLI, which import this module, must load without it
    import torch

    g, w = got.detach().double(), want.detach().double()
    both_finite = torch.isfinite(g) & torch.isfinite(w)
    d = torch.where(both_finite, (g - w).abs(), torch.zeros_like(g))
    agree = (g == w) | (torch.isnan(g) & torch.isnan(w) if equal_nan else torch.zeros_like(g, dtype=torch.bool))
    bad = ~both_finite & ~agree
    count = int(bad.sum())
    first = None
    if count:
        flat = int(bad.reshape(-1).nonzero()[0])
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), g.shape)) if g.dim() else ()
        first = f"index {index}: got {float(g.reshape(-1)[flat]):g}, reference {float(w.reshape(-1)[flat]):g}"
    return ElementDiff(float(d.max()) if d.numel() else 0.0, d, count, first)


def check_tolerance(value: float, what: str) -> float:
    """A tolerance must be a finite number >= 0 (a NaN bound makes every
    comparison false, a negative one every comparison fail)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number >= 0, not {value!r}")
    return float(value)
