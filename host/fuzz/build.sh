#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz_parse, fuzz_run; fuzz_et_glue[_heap] and
# fuzz_et_pte in the 64-bit variant when the executorch wheel is importable by $PYTHON, default
# python3) with clang, ASan and UBSan (-fno-sanitize-recover=all), in 64-bit
# and in 32-bit (-m32) form:
#
#   host/fuzz/build.sh BUILD_ROOT [x86_64] [i386]     (default: both)
#
# Each variant lands in BUILD_ROOT/<variant>/fuzz/. A variant whose
# toolchain is missing (clang, clang's libFuzzer/ASan runtime for that
# architecture, 32-bit libstdc++) is skipped with a message saying what is
# missing; it is listed in BUILD_ROOT/skipped. Exit status 1 if no variant
# could be built or a build failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${1:?usage: build.sh BUILD_ROOT [x86_64] [i386]}
shift
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(x86_64 i386)
mkdir -p "$root"
root=$(cd "$root" && pwd)
: >"$root/skipped"

CC=${CC:-clang}
PYTHON=${PYTHON:-$(command -v python3 || true)}
CXX=${CXX:-clang++}
SAN="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"

probe() {  # probe FLAGS: can clang++ link and run a trivial fuzz target with FLAGS?
  local dir
  dir=$(mktemp -d)
  printf '#include <stdint.h>\n#include <stddef.h>\n#include <string>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t* d, size_t n) { std::string s((const char*)d, n); return (int)s.size() * 0; }\n' >"$dir/p.cpp"
  if ! "$CXX" $1 -fsanitize=fuzzer "$dir/p.cpp" -o "$dir/p" >"$dir/log" 2>&1; then
    tail -3 "$dir/log"
    rm -rf "$dir"
    return 1
  fi
  if ! "$dir/p" -runs=1 >"$dir/log" 2>&1; then
    echo "a trivial fuzz target built with '$1' does not run: $(tail -1 "$dir/log")"
    rm -rf "$dir"
    return 1
  fi
  rm -rf "$dir"
}

built=0
failed=0
for v in "${variants[@]}"; do
  case "$v" in
    x86_64) arch="" ;;
    i386) arch="-m32" ;;
    *) echo "build.sh: unknown variant $v" >&2; exit 2 ;;
  esac
  flags="$arch $SAN"
  if ! command -v "$CXX" >/dev/null; then
    echo "SKIP fuzz $v: $CXX is not installed (apt-get install clang libclang-rt-14-dev)" | tee -a "$root/skipped"
    continue
  fi
  if ! why=$(probe "$flags"); then
    why=${why:-the compiler gave no output}
    echo "SKIP fuzz $v: $CXX cannot build a sanitized libFuzzer target with '${arch:-64-bit}' ($why)" | tee -a "$root/skipped"
    continue
  fi
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  b="$root/$v"
  # The runtime and kernels get coverage instrumentation (fuzzer-no-link);
  # only the fuzz executables link libFuzzer itself.
  if ! (env -u ESPNN_DIR CC="$CC" CXX="$CXX" cmake -S "$here/.." -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=None \
          -DESPNN_BUILD_PYTHON=OFF -DESPNN_BUILD_TOOLS=OFF -DESPNN_BUILD_FUZZERS=ON \
          ${PYTHON:+"-DPython_EXECUTABLE=$PYTHON"} \
          "-DCMAKE_C_FLAGS=$flags -fsanitize=fuzzer-no-link" "-DCMAKE_CXX_FLAGS=$flags -fsanitize=fuzzer-no-link" \
          "-DCMAKE_EXE_LINKER_FLAGS=$flags" >"$b.configure.log" 2>&1 &&
        cmake --build "$b" --target fuzz_parse fuzz_run lifecycle_check -j "$(nproc)" >"$b.build.log" 2>&1); then
    echo "FAIL fuzz $v: build failed; see $b.configure.log / $b.build.log" >&2
    tail -30 "$b.build.log" >&2 || true
    failed=1
    continue
  fi
  # The ExecuTorch glue target exists only where the wheel could be used.
  if grep -q "fuzz_et_glue: skipped" "$b.configure.log"; then
    echo "SKIP fuzz $v et_glue et_glue_heap et_pte: $(sed -n 's/.*fuzz_et_glue: skipped (\(.*\))/\1/p' "$b.configure.log" | tail -1)" | tee -a "$root/skipped"
  elif ! cmake --build "$b" --target fuzz_et_glue fuzz_et_glue_heap fuzz_et_pte -j "$(nproc)" >>"$b.build.log" 2>&1; then
    echo "FAIL fuzz $v: fuzz_et_glue build failed; see $b.build.log" >&2
    tail -30 "$b.build.log" >&2 || true
    failed=1
    continue
  fi
  echo "built fuzz $v: $(cd "$b/fuzz" && ls fuzz_* 2>/dev/null | grep -v '\.' | tr '\n' ' ')"
  built=$((built + 1))
done
[ "$failed" -eq 0 ] && [ "$built" -gt 0 ]
