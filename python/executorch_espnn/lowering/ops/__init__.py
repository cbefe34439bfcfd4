"""Op lowerings, one module per op family. Importing this package registers
them all; a new family is a new module plus one line here (see
docs/lowering.md)."""

from . import (  # noqa: F401
    activations,
    conv,
    elementwise,
    linear,
    mean,
    pooling,
    quantize,
    shape,
    softmax,
)
