"""Accuracy on real data: float vs int8 PyTorch vs the ESP-NN delegate on handwritten digits.

    python examples/digits_accuracy.py [--epochs 8] [--batch 50] [--output build/digits/digits_cnn.pte]

scikit-learn's bundled handwritten digits (1797 8x8 grey images, shipped with
the package, no download) are split into a stratified training set (75%) and
test set (25%) with a fixed seed. The zoo's digits_cnn is trained on the
training set (fixed seeds), quantized with EspNNQuantizer (calibrated on
training images), lowered to one ESP-NN delegate and written as a .pte. The
test set then goes through the float model, the int8 PyTorch model
(convert_pt2e) and the .pte on executorch.runtime (the delegate on the native
runtime, the same C++ as on the ESP32), and the three top-1 accuracies are
reported. The delegate must be within 1 percentage point of int8 PyTorch.

The .pte is exported for a fixed batch (--batch); the test set is run in
batches of that size (the last one padded and the padding discarded).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from espnn_example import lower, write_pte  # noqa: E402
from executorch_espnn import output_scales, quantize  # noqa: E402
from executorch_espnn.models import digits_cnn  # noqa: E402
from executorch_espnn.runtime import load_program, run_pte  # noqa: E402

SEED = 0
TOLERANCE_PP = 1.0  # delegate vs int8 PyTorch, percentage points


@dataclass
class Accuracy:
    float_top1: float
    int8_top1: float
    delegate_top1: float
    test_images: int
    disagreements: int  # test images whose delegate top-1 differs from int8 PyTorch's
    max_lsb: float  # largest logit difference, delegate vs int8 PyTorch, in output LSBs
    partitions: int
    cpu_ops: int

    @property
    def ok(self) -> bool:
        return abs(self.delegate_top1 - self.int8_top1) * 100 <= TOLERANCE_PP and self.float_top1 > 0.9


def load_split(seed: int = SEED):
    """(train images, train labels, test images, test labels): [N,1,8,8] float in [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images.reshape(-1, 1, 8, 8) / 16.0).astype(np.float32)  # pixel values are 0..16
    x_tr, x_te, y_tr, y_te = train_test_split(images, digits.target, test_size=0.25, random_state=seed,
                                              stratify=digits.target)
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in (x_tr, y_tr, x_te, y_te))


def train(model, images, labels, epochs: int, seed: int = SEED):
    """Adam, batch 64, cross-entropy. One thread: for batches this small, thread
    hand-offs cost more than they save (and the machine may be shared)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(seed)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.train()
        for _ in range(epochs):
            order = torch.randperm(len(images), generator=g)
            for i in range(0, len(images), 64):
                idx = order[i:i + 64]
                loss = torch.nn.functional.cross_entropy(model(images[idx]), labels[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def batches(images, size: int):
    """Fixed-size batches (the .pte's input shape); the last one zero-padded."""
    pad = (-len(images)) % size
    padded = torch.cat([images, images.new_zeros(pad, *images.shape[1:])])
    return [padded[i:i + size] for i in range(0, len(padded), size)]


def predict(fn, images, size: int):
    with torch.no_grad():
        return torch.cat([fn(b) for b in batches(images, size)])[:len(images)]


def top1(logits, labels) -> float:
    return (logits.argmax(1) == labels).float().mean().item()


def evaluate(epochs: int = 8, batch: int = 50, output: Path = Path("build/digits/digits_cnn.pte")) -> Accuracy:
    x_tr, y_tr, x_te, y_te = load_split()
    model, _ = digits_cnn(seed=SEED)
    train(model, x_tr, y_tr, epochs)

    example = (x_tr[:batch],)
    calibration = [(b,) for b in batches(x_tr, batch)[:-1]]  # full batches of training images only
    quantized = quantize(model, example, calibration)
    edge, report = lower(quantized, example)
    pte = write_pte(edge, output)

    program = load_program(pte)
    float_logits = predict(model, x_te, batch)
    int8_logits = predict(quantized, x_te, batch)
    delegate_logits = predict(lambda b: run_pte(None, [b], program=program)[0], x_te, batch)
    forward = report.to_dict()["forward"]
    return Accuracy(
        float_top1=top1(float_logits, y_te), int8_top1=top1(int8_logits, y_te),
        delegate_top1=top1(delegate_logits, y_te), test_images=len(y_te),
        disagreements=int((delegate_logits.argmax(1) != int8_logits.argmax(1)).sum()),
        max_lsb=float((delegate_logits - int8_logits).abs().max()) / output_scales(quantized)[0],
        partitions=len(forward["partitions"]), cpu_ops=forward["num_cpu_ops"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8, help="training epochs (default 8)")
    parser.add_argument("--batch", type=int, default=50, help="batch size the .pte is exported for (default 50)")
    parser.add_argument("--output", type=Path, default=Path("build/digits/digits_cnn.pte"))
    args = parser.parse_args(argv)

    acc = evaluate(args.epochs, args.batch, args.output)
    print(f"digits test set ({acc.test_images} images, seed {SEED}), top-1 accuracy:")
    print(f"  float PyTorch          {100 * acc.float_top1:6.2f}%")
    print(f"  int8 PyTorch           {100 * acc.int8_top1:6.2f}%")
    print(f"  ESP-NN delegate (.pte) {100 * acc.delegate_top1:6.2f}%   "
          f"(top-1 differs from int8 PyTorch on {acc.disagreements} image(s); logits max {acc.max_lsb:.0f} LSB apart)")
    print("digits_accuracy: " + ("OK" if acc.ok else "FAILED") +
          f" (delegate within {TOLERANCE_PP:g} pp of int8 PyTorch, float > 90%)")
    return 0 if acc.ok else 1


if __name__ == "__main__":
    sys.exit(main())
