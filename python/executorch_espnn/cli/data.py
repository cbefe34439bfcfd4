"""Calibration, evaluation and training data for ``espnn compile``.

A data source is one of:

* a folder: ``.npy`` files and/or images (PNG/JPEG/BMP/PPM/PGM; images need
  Pillow). Images in sub-folders are labelled by sub-folder (sorted names ->
  class 0, 1, ...), like torchvision's ImageFolder; images are resized to the
  model's input H x W and scaled to [0, 1];
* a ``.npy`` file: N samples of the (single) model input, shape ``(N, *shape[1:])``;
* a ``.npz`` file: inputs under ``x`` (or ``inputs``), labels under ``y`` (or ``labels``);
* ``module:function`` or ``path/to/file.py:function``: called without
  arguments, returns an iterable of batches; a batch is the model's inputs (a
  tensor, or a tuple of tensors for several inputs) or ``(inputs, labels)``.

Every batch has the shapes of the model's example inputs (the program is
exported with static shapes), so samples are grouped by the example's batch size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import UsageError
from .files import load_npy, native_byte_order, regular_file
from .loading import load_callable

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm"}


@dataclass
class Batch:
    inputs: tuple  # torch tensors, shaped like the example inputs
    labels: object = None  # a torch int tensor of class ids (batch,), or None


@dataclass
class Dataset:
    source: str  # what the user gave ("random" for the default)
    batches: list[Batch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # conversions the user should know of (dtype casts)

    @property
    def labelled(self) -> bool:
        return bool(self.batches) and all(b.labels is not None for b in self.batches)

    @property
    def samples(self) -> int:
        return sum(int(b.inputs[0].shape[0]) if b.inputs[0].dim() else 1 for b in self.batches)


def random_dataset(example_inputs, batches: int, seed: int = 0) -> Dataset:
    """The example inputs plus Gaussian batches of their shapes."""
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = [Batch(tuple(example_inputs))]
    for _ in range(batches - 1):
        out.append(Batch(tuple(torch.randn(x.shape, generator=gen).to(x.dtype) if x.is_floating_point()
                               else x.clone() for x in example_inputs)))
    return Dataset("random", out)


def load_dataset(spec: str, example_inputs, what: str, *, limit: int | None = None,
                 need_labels: bool = False) -> Dataset:
    """Reads a data source (see the module docstring) into batches shaped like
    `example_inputs`. `what` names the option in error messages."""
    path = Path(spec)
    if not path.exists() and (path.suffix in (".npy", ".npz") or ":" not in spec):
        raise UsageError(f"{what} {spec}: the file does not exist")
    if path.is_dir():
        samples, labels = _folder(path, example_inputs, what)
        ds = _group(spec, [samples], labels, example_inputs, what)
    elif path.suffix == ".npy":
        ds = _group(spec, [_npy(path, what)], None, example_inputs, what)
    elif path.suffix == ".npz":
        samples, labels = _npz(path, what)
        ds = _group(spec, [samples], labels, example_inputs, what)
    elif ":" in spec and not path.exists():
        ds = _function(spec, example_inputs, what)
    else:
        raise UsageError(f"{what} {spec!r}: not a folder, .npy, .npz or module:function "
                         + ("(the file does not exist)" if not path.exists() else "(unknown file type)"))
    if limit is not None:
        ds.batches = ds.batches[:limit]
    if not ds.batches:
        raise UsageError(f"{what} {spec!r}: no samples found")
    if need_labels and not ds.labelled:
        raise UsageError(f"{what} {spec!r} has no labels: use an .npz with x and y, a folder with one "
                         "sub-folder per class, or a function yielding (inputs, labels)")
    return ds


def _npy(path: Path, what: str) -> np.ndarray:
    return load_npy(path, what)


def _sample_dtype_note(kind: str, name: str, model_dtype, where: str) -> str | None:
    """What feeding samples of dtype `name` (numpy kind `kind`: b, i, u, f,
    c, ...) to a model input of torch dtype `model_dtype` does: None when
    nothing changes, a note for a cast that keeps every value's meaning
    (integers, bool, another float precision), UsageError for data the input
    cannot represent (complex, strings, objects, dates; floats for an
    integer input)."""
    want = str(model_dtype).removeprefix("torch.")
    if kind not in "biuf":
        raise UsageError(f"{where}: {'complex' if kind == 'c' else name} samples cannot feed the model's {want} "
                         "input" + (" (the imaginary part would be lost)" if kind == "c" else "")
                         + "; convert the data to real numbers first")
    if name == want:
        return None
    if kind == "f" and not model_dtype.is_floating_point:
        raise UsageError(f"{where}: floating-point samples cannot feed the model's {want} input; give integer data")
    return f"{where}: {name} samples cast to the model input's {want}"


def _torch_kind(dtype) -> str:
    if dtype.is_complex:
        return "c"
    if dtype.is_floating_point:
        return "f"
    return "b" if str(dtype) == "torch.bool" else ("u" if str(dtype) == "torch.uint8" else "i")


def _npz(path: Path, what: str):
    regular_file(path, what)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:
        raise UsageError(f"{what}: cannot read {path}: {e}") from e
    x_key = next((k for k in ("x", "inputs") if k in arrays), None)
    y_key = next((k for k in ("y", "labels") if k in arrays), None)
    if x_key is None:
        if len(arrays) != 1:
            raise UsageError(f"{what}: {path} has arrays {sorted(arrays)}; name the inputs x (and labels y)")
        x_key = next(iter(arrays))
    labels = arrays[y_key] if y_key else None
    if labels is not None and (labels.dtype.kind not in "iub" or labels.ndim != 1):
        raise UsageError(f"{what}: {path} labels {y_key!r} are {labels.dtype} of shape {labels.shape}; give "
                         "one integer class id per sample")
    return native_byte_order(arrays[x_key]), labels


def _image(path: Path, shape, what: str) -> np.ndarray:
    try:
        # lazy: Pillow is optional (image folders only); its absence is reported
        from PIL import Image
    except ImportError:
        raise UsageError(f"{what}: {path} is an image, and reading images needs Pillow, which is not "
                         "installed (pip install pillow), or convert the images to .npy") from None
    if len(shape) != 4 or shape[1] not in (1, 3):
        raise UsageError(f"{what}: images need a model input of shape (N, 1|3, H, W), this one is {tuple(shape)}")
    try:
        with Image.open(path) as im:
            im = im.convert("L" if shape[1] == 1 else "RGB").resize((int(shape[3]), int(shape[2])))
            a = np.asarray(im, dtype=np.float32) / 255.0
    except (OSError, ValueError) as e:  # PIL's UnidentifiedImageError is an OSError
        raise UsageError(f"{what}: cannot read image {path}: {e}") from e
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def _folder(folder: Path, example_inputs, what: str):
    if len(example_inputs) != 1:
        raise UsageError(f"{what}: a folder feeds single-input models; this one has {len(example_inputs)} "
                         "inputs (use a data function)")
    shape = tuple(example_inputs[0].shape)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    samples, labels = [], []
    # A file's class is the top-level sub-folder it is under (None directly in `folder`).
    files = [(p, classes.index(p.relative_to(folder).parts[0]) if p.parent != folder else None)
             for p in sorted(folder.rglob("*")) if p.is_file()]
    for p, label in files:
        suffix = p.suffix.lower()
        if suffix == ".npy":
            a = _npy(p, what)
            a = a[None] if a.shape == shape[1:] else a
        elif suffix in IMAGE_SUFFIXES:
            a = _image(p, shape, what)[None]
        else:
            continue
        samples.append(a)
        labels += [label] * len(a)
    if not samples:
        raise UsageError(f"{what}: folder {folder} has no .npy or image files")
    if any(lab is None for lab in labels):
        labels = None
    return np.concatenate([_check_sample_shape(s, shape, f"{what} ({folder})") for s in samples]), (
        np.asarray(labels) if labels else None)


def _check_sample_shape(a: np.ndarray, shape, where: str) -> np.ndarray:
    if a.shape == shape[1:]:
        a = a[None]
    if a.shape[1:] != shape[1:]:
        raise UsageError(f"{where}: samples of shape {tuple(a.shape)} do not fit the model input "
                         f"{tuple(shape)}; expected (N, {', '.join(map(str, shape[1:]))})")
    return a


def _group(spec, samples_list, labels, example_inputs, what) -> Dataset:
    """Cuts N samples into batches of the example's batch size."""
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    if len(example_inputs) != 1:
        raise UsageError(f"{what} {spec!r}: array files feed single-input models; this one has "
                         f"{len(example_inputs)} inputs (use a data function)")
    ex = example_inputs[0]
    shape = tuple(ex.shape)
    samples = _check_sample_shape(np.asarray(samples_list[0]), shape, f"{what} {spec}")
    note = _sample_dtype_note(samples.dtype.kind, str(samples.dtype), ex.dtype, f"{what} {spec}")
    if labels is not None and len(labels) != len(samples):
        raise UsageError(f"{what} {spec!r}: {len(samples)} samples but {len(labels)} labels")
    b = shape[0] if shape else 1
    n = len(samples) // b * b
    ds = Dataset(spec, notes=[note] if note else [])
    for i in range(0, n, b):
        x = torch.from_numpy(np.ascontiguousarray(samples[i:i + b])).to(ex.dtype)
        y = torch.from_numpy(np.asarray(labels[i:i + b]).astype(np.int64)) if labels is not None else None
        ds.batches.append(Batch((x,), y))
    return ds


def _function(spec, example_inputs, what) -> Dataset:
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    fn = load_callable(spec, what)
    try:
        items = iter(fn())
    except Exception as e:
        raise UsageError(f"{what} {spec!r}: calling it failed: {type(e).__name__}: {e}") from e
    ds = Dataset(spec)
    n = len(example_inputs)
    for k, item in enumerate(items):
        labels = None
        if isinstance(item, torch.Tensor):
            inputs = (item,)
        elif isinstance(item, (tuple, list)) and len(item) == 2 and (
                isinstance(item[0], (tuple, list)) or n == 1):
            inputs, labels = item
            inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
            labels = torch.as_tensor(labels).long().reshape(-1)
        elif isinstance(item, (tuple, list)):
            inputs = tuple(item)
        else:
            raise UsageError(f"{what} {spec!r}: batch {k} is a {type(item).__name__}; yield tensors, "
                             "tuples of tensors, or (inputs, labels)")
        for j, x in enumerate(inputs):
            if not isinstance(x, torch.Tensor):
                raise UsageError(f"{what} {spec!r}: batch {k} input {j} is a {type(x).__name__}; yield tensors")
        if len(inputs) != n or any(tuple(x.shape) != tuple(e.shape) for x, e in zip(inputs, example_inputs)):
            got = [tuple(x.shape) for x in inputs]
            raise UsageError(f"{what} {spec!r}: batch {k} has input shapes {got}, the model's example "
                             f"inputs are {[tuple(e.shape) for e in example_inputs]}")
        for j, (x, e) in enumerate(zip(inputs, example_inputs)):
            note = _sample_dtype_note(_torch_kind(x.dtype), str(x.dtype).removeprefix("torch."), e.dtype,
                                      f"{what} {spec!r} input {j}")
            if note and note not in ds.notes:
                ds.notes.append(note)
        ds.batches.append(Batch(tuple(x.to(e.dtype) for x, e in zip(inputs, example_inputs)), labels))
    return ds
