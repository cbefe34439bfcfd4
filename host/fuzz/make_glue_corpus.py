"""Regenerates host/fuzz/corpus/et_glue/ and corpus/et_pte/, the seeds of
fuzz_et_glue and fuzz_et_pte:

    PYTHONPATH=<dir with executorch_espnn, its _native and _et_backend> \
        python host/fuzz/make_glue_corpus.py [--out DIR]

Seeds are real lowered payloads: the XTS3 blobs of the EspNNBackend delegates
of the small programs in tests/hardening/et_programs.py (a fully delegated
CNN, an MLP, a CPU-fallback program with two delegates), each prefixed with
fuzz_et_glue's control byte (see fuzz_et_glue.cpp): 0x00 (aligned payload,
matching tensors) and 0x41 (payload at an odd address, event tracer
attached); the CNN's payload also once per tensor mismatch kind and once per
random-layout case (control bit 7: dim orders and strides, see LAYOUTS).
fuzz_et_pte's seeds are the same programs' whole .pte files, plus
tests/hardening/data/original.pte (a fully delegated CNN with hard-swish,
sigmoid, softmax: the file the corrupted programs in tests/hardening/data were mutated from).
The directories' contents are replaced (`--out DIR`: DIR/et_glue and
DIR/et_pte instead); the output is deterministic on one host (the programs
are quantized by PyTorch's float kernels, whose last bits depend on the CPU;
tests/hardening/test_fuzz_seeds.py compares what does not).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "host" / "fuzz" / "corpus"
sys.path.insert(0, str(REPO / "tests" / "hardening"))

import et_programs  # noqa: E402
from corpus_dirs import replace_corpora  # noqa: E402  (host/fuzz, the script's own directory)

ALIGNED_MATCHING, ODD_TRACED = 0x00, 0x41
MISMATCHES = {1: "dtype", 2: "shape", 3: "rank", 4: "argcount", 5: "dimorder", 6: "nottensor", 7: "nulldata"}
# Control bit 7 with the dim-order mismatch: the input's last byte picks the
# argument's dim order (bits 0-4, the k-th permutation) and a stride change
# (bits 5-6). Identity and no change (0x00) must run; each other one be refused.
RANDOM_LAYOUT = 0x80
LAYOUTS = {"identity": 0x00, "swap_last": 0x01, "reversed": 0x17, "inner_stride_x2": 0x20,
           "outer_stride_plus1": 0x40, "zero_stride": 0x60, "permuted_and_strided": 0x25}


def seeds() -> dict[str, dict[str, bytes]]:
    """Corpus directory name -> {file name: bytes}."""
    seeds: dict[str, bytes] = {}
    ptes = {"espnn_cnn.pte": (REPO / "tests" / "hardening" / "data" / "original.pte").read_bytes()}
    for build in et_programs.ALL:
        program = build()
        ptes[f"{program.name}.pte"] = program.pte
        for i, payload in enumerate(program.payloads):
            stem = f"{program.name}_d{i}"
            seeds[f"{stem}_aligned.seed"] = bytes([ALIGNED_MATCHING]) + payload
            seeds[f"{stem}_odd_traced.seed"] = bytes([ODD_TRACED]) + payload
            if program.name == "cnn":
                for kind, name in MISMATCHES.items():
                    seeds[f"{stem}_{name}.seed"] = bytes([kind << 1]) + payload
                for name, tail in LAYOUTS.items():
                    seeds[f"{stem}_layout_{name}.seed"] = bytes([RANDOM_LAYOUT | (5 << 1)]) + payload + bytes([tail])
    return {"et_glue": seeds, "et_pte": ptes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerates the fuzz_et_glue and fuzz_et_pte seed corpora.")
    ap.add_argument("--out", type=Path, default=CORPUS, help="directory of the et_glue/ and et_pte/ corpora")
    replace_corpora(ap.parse_args(argv).out, seeds())
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
