"""Keyword spotting: DS-CNN on 49x10 MFCCs, fully delegated to ESP-NN, checked on the host.

    python examples/kws_dscnn.py [--calibration 16] [--output build/kws/ds_cnn.pte]

The MLPerf Tiny keyword-spotting network (the zoo's ds_cnn: conv 64@10x4
stride 2, four depthwise-separable blocks, average pool, 12 classes) takes
MFCC features of one second of 16 kHz audio: 49 frames (40 ms windows, 20 ms
hop) x 10 coefficients. No speech data ships with the project, so the
example synthesizes utterance-like clips (voiced harmonics with a moving
pitch and envelope, plus noise) and computes their MFCCs with numpy; they
calibrate EspNNQuantizer and feed the host run. The weights are untrained,
so the printed keyword is arbitrary; what the example shows is that the whole
network becomes one ESP-NN delegate and that the .pte, run by
executorch.runtime with the delegate on the native runtime, gives the int8
PyTorch model's output within 1 LSB.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from espnn_example import host_check, lower, write_pte  # noqa: E402
from executorch_espnn import quantize  # noqa: E402
from executorch_espnn.models import ds_cnn  # noqa: E402
from executorch_espnn.runtime import run_pte  # noqa: E402

# The 12 output classes of the MLPerf Tiny KWS task (Speech Commands v2).
KEYWORDS = ("silence", "unknown", "yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
RATE, WINDOW, HOP, N_FFT, N_MELS, N_MFCC = 16000, 640, 320, 1024, 40, 10


def synth_clip(rng: np.random.Generator) -> np.ndarray:
    """One second of utterance-like audio: a few harmonics of a gliding pitch
    under a syllable envelope, plus background noise."""
    t = np.arange(RATE) / RATE
    f0 = rng.uniform(90, 250) * (1 + rng.uniform(-0.3, 0.3) * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    voice = sum(rng.uniform(0.2, 1.0) / k * np.sin(k * phase) for k in range(1, 8))
    start, length = rng.uniform(0.1, 0.4), rng.uniform(0.3, 0.5)
    envelope = np.exp(-0.5 * ((t - start - length / 2) / (length / 4)) ** 2)
    return (voice * envelope + 0.02 * rng.standard_normal(RATE)).astype(np.float32)


def mel_filterbank() -> np.ndarray:
    """[N_MELS, N_FFT//2+1] triangular filters equally spaced on the mel scale, 20 Hz..4 kHz."""
    mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    hz = lambda m: 700 * (10 ** (m / 2595) - 1)  # noqa: E731
    edges = hz(np.linspace(mel(20), mel(4000), N_MELS + 2))
    bins = np.fft.rfftfreq(N_FFT, 1 / RATE)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    return np.maximum(0, np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)))


def mfcc(clip: np.ndarray) -> np.ndarray:
    """[49, 10]: Hann-windowed frames -> power spectrum -> log mel energies -> DCT-II."""
    frames = np.lib.stride_tricks.sliding_window_view(clip, WINDOW)[::HOP] * np.hanning(WINDOW)
    power = np.abs(np.fft.rfft(frames, N_FFT)) ** 2
    log_mel = np.log(power @ mel_filterbank().T + 1e-6)
    n = np.arange(N_MELS)
    dct = np.cos(np.pi / N_MELS * (n[None, :] + 0.5) * np.arange(N_MFCC)[:, None])
    return (log_mel @ dct.T).astype(np.float32)


def features(n: int, seed: int) -> torch.Tensor:
    """[n,1,49,10] MFCCs of n synthetic clips, standardized per coefficient
    (as a KWS front end normalizes its features)."""
    rng = np.random.default_rng(seed)
    x = np.stack([mfcc(synth_clip(rng)) for _ in range(n)])[:, None]
    x = (x - x.mean(axis=(0, 1, 2))) / (x.std(axis=(0, 1, 2)) + 1e-6)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=int, default=16, help="calibration clips (default 16)")
    parser.add_argument("--output", type=Path, default=Path("build/kws/ds_cnn.pte"))
    args = parser.parse_args(argv)

    model, example = ds_cnn()
    clips = features(args.calibration + 1, seed=0)
    assert clips.shape[1:] == example[0].shape[1:], "MFCC shape must match the model's [1,1,49,10] input"
    calibration = [(clips[i:i + 1],) for i in range(args.calibration)]
    test_clip = clips[-1:]  # not used for calibration

    quantized = quantize(model, example, calibration)
    edge, report = lower(quantized, example)
    pte = write_pte(edge, args.output)
    lsb = host_check(pte, quantized, [test_clip])

    (scores,) = run_pte(pte, [test_clip])
    print(f"keyword (untrained weights, arbitrary): {KEYWORDS[int(scores.argmax())]!r}")
    forward = report.to_dict()["forward"]
    ok = len(forward["partitions"]) == 1 and forward["num_cpu_ops"] == 0 and lsb <= 1
    print("kws_dscnn: " + ("OK" if ok else "FAILED") + " (1 partition, 0 CPU ops, within 1 LSB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
