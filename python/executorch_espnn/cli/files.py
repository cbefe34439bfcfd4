"""Reading and writing the user's files for the ``espnn`` subcommands, with
every failure a one-line :class:`UsageError` (exit 2) that names the file or
option: a missing file, a directory or device where a file belongs, an
unreadable or malformed array, a folder that is a file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import UsageError


def _name(path: Path, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def regular_file(path: Path, what: str = "") -> Path:
    """`path` if it is a regular file; UsageError saying what it is otherwise.
    `what` (an option name, or empty) starts the message."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{_name(path, what)}: is a directory; give a file")
    if not path.exists():
        raise UsageError(f"{_name(path, what)}: no such file")
    if not path.is_file():
        raise UsageError(f"{_name(path, what)}: not a regular file (a device, pipe or socket); give a file")
    return path


def read_bytes(path: Path, what: str = "") -> bytes:
    regular_file(path, what)
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"{_name(path, what)}: cannot read it: {e.strerror or e}") from e


def load_npy(path: Path, what: str, *, numeric: bool = False) -> np.ndarray:
    """A .npy array in this host's byte order (a byte-swapped file keeps its
    values). `numeric`: refuse arrays that are not bool, integer or real
    floating point (strings, objects, complex)."""
    regular_file(path, what)
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError, OSError, EOFError... for a malformed file
        raise UsageError(f"{_name(path, what)}: not a readable .npy file: {e}") from e
    if not isinstance(a, np.ndarray):
        raise UsageError(f"{_name(path, what)}: holds several arrays (an .npz?); give a single-array .npy file")
    if numeric and a.dtype.kind not in "biuf":
        raise UsageError(f"{_name(path, what)}: dtype {a.dtype} is not a real number type; give bool, integer or "
                         "floating-point data")
    return native_byte_order(a)


def native_byte_order(a: np.ndarray) -> np.ndarray:
    return a.astype(a.dtype.newbyteorder("=")) if a.dtype.byteorder not in "=|" else a


def writable_folder(path: Path, what: str) -> Path:
    """Creates folder `path` (and its parents) unless it exists; UsageError
    when it is a file or cannot be created."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{_name(path, what)}: exists and is not a folder; name a folder (it is created if needed)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{_name(path, what)}: cannot create the folder: {e.strerror or e}") from e
    return path


def writable_file(path: Path, what: str) -> Path:
    """Checks that file `path` can be written (its folder is created); a
    directory in its place or an uncreatable folder is a UsageError."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{_name(path, what)}: is a directory; name a file")
    writable_folder(path.parent, what)
    return path


def write_file(path: Path, data: bytes | str, what: str) -> None:
    """Writes `data` to `path` (its folder created); any OS refusal is a
    UsageError naming the option."""
    writable_file(path, what)
    try:
        if isinstance(data, str):
            Path(path).write_text(data)
        else:
            Path(path).write_bytes(data)
    except OSError as e:
        raise UsageError(f"{_name(path, what)}: cannot write it: {e.strerror or e}") from e
