"""The check every path of this package runs on a ``.pte`` before ExecuTorch
reads it (``runtime.load_program`` / ``run_pte``, ``espnn run``, ``espnn
report``, ``pte_suite``).

The check itself is C++: ``espnn::pte::CheckProgram``
(components/espnn_runtime/include/espnn/pte_check.h), the same function
main/'s board runner calls on the chip, reached here through
``_native.check_pte``. It closes the gaps ExecuTorch 1.5.1 leaves after its
own full verification (``Verification.InternalConsistency``, which the
loaders here also ask for): delegate entries without the fields its loader
dereferences unchecked (a segmentation fault), and names that are not
printable ASCII (its Python binding aborts the process on a log line that is
not UTF-8). docs/runtime.md ("Known limits") says what neither covers.
"""

from __future__ import annotations

from . import _native


class InvalidProgramError(ValueError):
    """A .pte that ExecuTorch's loader must not see; the message is one line
    naming the file and what is wrong with it."""


def check_pte(pte: bytes | bytearray, name: str | None = None) -> None:
    """Raises InvalidProgramError ("NAME: what is wrong", or just what is
    wrong without a name) unless `pte` passes the device's check."""

    try:
        _native.check_pte(bytes(pte))
    except ValueError as e:
        raise InvalidProgramError(f"{name}: {e}" if name else str(e)) from None
