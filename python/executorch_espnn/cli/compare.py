"""Comparing a program's outputs with a reference, for ``compile`` and ``run``:
the largest difference per output over all samples, in output steps (LSB)
for int8 outputs and with an absolute + relative bound for float ones.

Running the programs is ``executorch_espnn.runtime``'s (the ``.pte`` in
ExecuTorch's runtime, or the lowered program with every ESP-NN delegate on the
native runtime when the host's runtime lacks a CPU kernel the ``.pte`` calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def as_list(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


@dataclass
class Comparison:
    """Largest difference per output over all samples compared."""

    scales: list  # output step (LSB) per output, None for float outputs
    # Float outputs may also differ by this fraction of the reference element. Two float
    # implementations (ExecuTorch's portable kernels, PyTorch's vectorized ones, whose
    # summation order depends on the host's ISA) round differently by a few ulps, which an
    # absolute bound alone turns into a failure for large values. 0: absolute bound only.
    float_rtol: float = 0.0
    max_abs: list[float] = field(default_factory=list)
    # per float output: max over elements of |got - want| - float_rtol * |want|
    float_excess: list[float] = field(default_factory=list)
    samples: int = 0
    differing: list[int] = field(default_factory=list)  # elements more than half a step (1e-5 for float) apart
    elements: list[int] = field(default_factory=list)

    def add(self, got: list, want: list) -> None:
        if len(got) != len(want):
            raise ValueError(f"{len(got)} outputs, the reference has {len(want)}")
        diffs, differing, excess = [], [], []
        for i, (g, w) in enumerate(zip(got, want)):
            if tuple(g.shape) != tuple(w.shape):
                raise ValueError(f"output {i}: shape {tuple(g.shape)}, the reference has {tuple(w.shape)}")
            d = (g.double() - w.double()).abs()
            diffs.append(float(d.max()) if g.numel() else 0.0)
            excess.append(float((d - self.float_rtol * w.double().abs()).max()) if g.numel() else 0.0)
            step = self.scales[i] / 2 if i < len(self.scales) and self.scales[i] else 1e-5
            differing.append(int((d > step).sum()))
        if not self.max_abs:
            self.max_abs, self.differing, self.elements = [0.0] * len(got), [0] * len(got), [0] * len(got)
            self.float_excess = [float("-inf")] * len(got)
        self.max_abs = [max(a, b) for a, b in zip(self.max_abs, diffs)]
        self.float_excess = [max(a, b) for a, b in zip(self.float_excess, excess)]
        self.differing = [a + b for a, b in zip(self.differing, differing)]
        self.elements = [a + g.numel() for a, g in zip(self.elements, got)]
        self.samples += 1

    @property
    def max_lsb(self) -> list:
        return [d / s if s else None for d, s in zip(self.max_abs, self.scales)]

    def passed(self, tolerance_lsb: float, float_atol: float) -> bool:
        # 1.001: a difference of exactly N steps computed in float may land a hair above N.
        # Float outputs: |got - want| <= float_atol + float_rtol * |want| for every element.
        return all((d <= tolerance_lsb * s * 1.001) if s else (e <= float_atol)
                   for d, e, s in zip(self.max_abs, self.float_excess, self.scales))
