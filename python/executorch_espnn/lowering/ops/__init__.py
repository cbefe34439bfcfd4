"""Op lowerings, one module per op family. Importing this package registers
them all; a new family is a new module plus one line here (see
docs/lowering.md). movement.py and resize_tables.py are helpers."""

from . import (  # noqa: F401
    activations,
    concat,
    conv,
    elementwise,
    hardswish,
    linear,
    lut,
    matmul,
    mean,
    norm,
    pad,
    pooling,
    quantize,
    recurrent,
    resize,
    shape,
    slicing,
    softmax,
    split,
    transpose_conv,
)
