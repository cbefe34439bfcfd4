"""Op lowerings, one module per op family. Importing this package imports
every module of it, and each registers its ops (lowering/registry.py), so a
new family is a new module and nothing else (see docs/lowering.md).
movement.py and resize_tables.py are helpers of the others and register
nothing."""

import importlib
import pkgutil

# In name order, as pkgutil lists them: the registry does not depend on it
# (a `when` lowering is tried before the op's general one), but the order of
# the preserved ops it collects does, so it stays fixed.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
