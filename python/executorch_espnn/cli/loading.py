"""Resolving ``module:function`` / ``path/to/file.py:function`` /
``torchvision:<name>`` into Python callables and models."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from .errors import UsageError

DEFAULT_MODEL = "executorch_espnn.models:tiny_cnn"


def _split(spec: str, what: str) -> tuple[str, str]:
    module, sep, attr = spec.rpartition(":")
    if not sep or not module or not attr:
        raise UsageError(f"{what} {spec!r} is not of the form module:function or path/to/file.py:function")
    return module, attr


def _load_file(path: Path, what: str):
    if not path.is_file():
        raise UsageError(f"{what}: file {path} does not exist")
    name = f"_espnn_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{what}: cannot import {path} (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # The file's own folder first, so that it can import its neighbours — at
    # import time and later, when its model or data function imports one
    # (`def model(): from helper import X`): the folder stays on the path for
    # the rest of the command (the process ends with it).
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise UsageError(f"{what}: importing {path} failed: {type(e).__name__}: {e}") from e
    return module


def load_callable(spec: str, what: str):
    """The function named by ``module:function`` or ``file.py:function``."""
    module_name, attr = _split(spec, what)
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        module = _load_file(Path(module_name), what)
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name and module_name.startswith(e.name):
                raise UsageError(f"{what} {spec!r}: no module named {e.name!r} (check the spelling, "
                                 "install it, or give a file: path/to/file.py:function)") from e
            raise UsageError(f"{what} {spec!r}: importing {module_name} failed: {e}") from e
        except Exception as e:
            raise UsageError(f"{what} {spec!r}: importing {module_name} failed: {type(e).__name__}: {e}") from e
    fn = getattr(module, attr, None)
    if fn is None:
        zoo = getattr(module, "ZOO", None)
        if isinstance(zoo, dict):  # a model zoo says which of its callables are models
            raise UsageError(f"{what} {spec!r}: {module_name} has no attribute {attr!r} "
                             f"(its models: {', '.join(zoo)})")
        # Functions first (the zoo's entry points), then classes and other callables.
        public = sorted((n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))),
                        key=lambda n: (not inspect.isfunction(getattr(module, n)), n))
        raise UsageError(f"{what} {spec!r}: {module_name} has no attribute {attr!r} "
                         f"(callables there: {', '.join(public[:12]) or 'none'})")
    if not callable(fn):
        raise UsageError(f"{what} {spec!r}: {attr} is a {type(fn).__name__}, not a function")
    return fn


def _torchvision_model(name: str):
    try:
        # lazy: torchvision is optional (torchvision: models only); its absence is reported
        import torchvision
    except ImportError:
        raise UsageError(f"model torchvision:{name} needs torchvision, which is not installed; install the "
                         "torchvision build that matches your torch (pip install torchvision), or give the "
                         "model as module:function (e.g. executorch_espnn.models:mobilenet_v2)") from None
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    try:
        model = torchvision.models.get_model(name, weights=None)
    except ValueError as e:
        raise UsageError(f"model torchvision:{name}: {e}") from e
    # No weights: nothing can be downloaded here; the graph and its lowering are what matter.
    return model.eval(), (torch.randn(1, 3, 224, 224),)


def load_model(spec: str):
    """(module in eval mode, example_inputs tuple) from a model spec."""
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    if spec.startswith("torchvision:"):
        return _torchvision_model(spec.split(":", 1)[1])
    fn = load_callable(spec, "model")
    try:
        result = fn()
    except Exception as e:
        raise UsageError(f"model {spec!r}: calling it failed: {type(e).__name__}: {e}") from e
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise UsageError(f"model {spec!r} must return (torch.nn.Module, example_inputs), got "
                         f"{type(result).__name__}")
    module, example = result
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"model {spec!r}: the first element returned is a {type(module).__name__}, "
                         "not a torch.nn.Module")
    if isinstance(example, torch.Tensor):
        example = (example,)
    example = tuple(example)
    if not example or not all(isinstance(x, torch.Tensor) for x in example):
        raise UsageError(f"model {spec!r}: example_inputs must be a tensor or a non-empty tuple of tensors")
    return module.eval(), example
