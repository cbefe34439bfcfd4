"""ExecuTorch's quantized kernel library, loaded where a program may need it.

A quantize / dequantize that a program leaves on portable kernels (next to an
op that runs on the CPU, or of a 0-dim value, in either mode) has its out
variant (for ``to_executorch``) and its runtime kernel (for loading the
``.pte``) in ``executorch.kernels.quantized``, which ExecuTorch does not load
by default: without it ``to_executorch`` fails with "Missing out variants"
and the program fails to load (error 0x14)."""


def load_quantized_kernels() -> None:
    # It registers both through torch.ops.load_library when imported.
    # lazy: executorch, and loading the library is the point of the call
    import executorch.kernels.quantized  # noqa: F401
