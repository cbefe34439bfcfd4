#!/usr/bin/env bash
# Smoke test of an INSTALLED executorch-espnn wheel (with its `test` extra):
#   scripts/wheel-smoke.sh [SOURCE_TREE]     (default: this checkout)
# Needs no compiler. Prints which compilers are on PATH (none are needed),
# where executorch_espnn is imported from (it must not be the source tree),
# compiles the bundled default model with `espnn compile` (export, quantize,
# lower, run the .pte on ExecuTorch's runtime of the executorch wheel and
# check it), then runs the tests marked `smoke` from SOURCE_TREE/tests.
# Run by scripts/wheel-check.sh in a venv without a compiler and by
# cibuildwheel on every built wheel (pyproject.toml [tool.cibuildwheel]).
set -euo pipefail
src=$(cd "${1:-${BASH_SOURCE[0]%/*}/..}" && pwd)
work=$(python -c 'import tempfile; print(tempfile.mkdtemp(prefix="espnn-smoke-"))')
cd "$work"

echo "== compilers reachable (none is needed):"
for tool in gcc cc c++ g++ clang clang++ ld cmake; do
  printf '   %-8s %s\n' "$tool" "$(command -v "$tool" || echo '-- not found')"
done

echo "== installed package"
python - "$src" <<'EOF'
import importlib.metadata as md
import pathlib
import sys

import executorch_espnn as e

pkg = pathlib.Path(e.__file__).resolve().parent
src = pathlib.Path(sys.argv[1]).resolve()
print(f"   executorch_espnn {e.__version__} from {pkg}")
print(f"   executorch {md.version('executorch')}, torch {md.version('torch')}, python {sys.version.split()[0]}")
if src in pkg.parents:
    sys.exit(f"executorch_espnn is imported from the source tree {src}, not from the installed wheel")
if e._et_backend is None:
    sys.exit(f"the EspNNBackend delegate did not load: {e.ET_BACKEND_ERROR}")
print(f"   delegate: {e._et_backend.BACKEND_NAME} built against executorch {e._et_backend.EXECUTORCH_VERSION}")
EOF

echo "== espnn compile (bundled default model)"
espnn --version
espnn compile -o "$work/tiny_cnn.pte"

echo "== pytest -m smoke"
cd "$src"
python -m pytest -m smoke -v -p no:cacheprovider --disable-warnings
