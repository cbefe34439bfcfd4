#!/usr/bin/env bash
# Builds the emulation tool chain that tests/idf and benchmarks/emulated.py
# use, from source trees the user fetched (no network, no Espressif
# installer): per chip an xtensa-<chip>-elf GCC 12 / binutils / newlib,
# Espressif's QEMU (qemu-system-xtensa with -M esp32s3 / -M esp32), and an
# ESP-IDF v5.5.5 tree with the submodules the build reads and its Python
# environment. docs/device-toolchain.md explains every step and change.
#
#   tools/device-toolchain/build.sh --sources DIR --prefix PREFIX
#       [--src NAME=PATH]... [--chips "esp32s3 esp32"] [--jobs N]
#       [--stages "check toolchain qemu idf executorch manifest"]
#
# DIR/<name> (or --src NAME=PATH) is each source of sources.txt: a git
# repository holding the pinned commit, or a file with the pinned sha256.
# Every source is checked before anything is built; the build exports the
# pinned commits (git archive) and applies this directory's patches/ (only
# the lines we change). Afterwards:
#
#   export ESPNN_DEVICE_PREFIX=PREFIX        # all tests/idf and the benchmarks need
#   . PREFIX/env.sh                           # or: the same for idf.py by hand
#
# PREFIX/manifest.json records the sources (pins), the patches (sha256),
# the build's wall time per stage and the sha256 of every built executable.
# A stage that is already complete (its stamp in PREFIX/.stamps) is skipped;
# delete the stamp to redo it.
#
# Emulation only: the compilers filter -mdisable-hardware-atomics (see
# docs/device-toolchain.md); nothing built here is what Espressif ships.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
sources="" prefix="" chips="esp32s3 esp32" jobs=$(nproc 2>/dev/null || echo 2)
stages="check toolchain qemu idf executorch manifest"
declare -A src_override=()

die() { echo "device-toolchain: $*" >&2; exit 1; }
usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --sources) sources=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --src) src_override[${2%%=*}]=${2#*=}; shift 2 ;;
    --chips) chips=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option $1" >&2; usage 2 ;;
  esac
done
[ -n "$prefix" ] || usage 2
mkdir -p "$prefix/.stamps" "$prefix/.work" "$prefix/logs"
prefix=$(cd "$prefix" && pwd)
work=$prefix/.work
for c in $chips; do
  case "$c" in esp32s3|esp32) ;; *) die "chip $c: only esp32s3 and esp32 are Xtensa chips Espressif's QEMU emulates" ;; esac
done

# ---------------------------------------------------------------- sources
declare -A kind=() pin=() upstream=()
names=()
while read -r name k p rest; do
  case "$name" in ''|'#'*) continue ;; esac
  names+=("$name"); kind[$name]=$k; pin[$name]=$p; upstream[$name]=$rest
done <"$here/sources.txt"

src_path() {  # src_path NAME: where the source is
  local n=$1
  if [ -n "${src_override[$n]:-}" ]; then echo "${src_override[$n]}"
  elif [ -n "$sources" ]; then echo "$sources/$n"
  else die "no source for $n: pass --sources DIR or --src $n=PATH"; fi
}

check_source() {  # check_source NAME: exit with a message unless the pin is there
  local n=$1 p
  p=$(src_path "$n")
  case "${kind[$n]}" in
    git)
      [ -e "$p" ] || die "$n: $p does not exist (${upstream[$n]})"
      [ "$(git -C "$p" cat-file -t "${pin[$n]}^{commit}" 2>/dev/null)" = commit ] ||
        die "$n: $p does not hold commit ${pin[$n]} (${upstream[$n]})"
      ;;
    file)
      [ -f "$p" ] || die "$n: $p is not a file (${upstream[$n]})"
      [ "$(sha256sum <"$p" | cut -d' ' -f1)" = "${pin[$n]}" ] ||
        die "$n: $p does not have sha256 ${pin[$n]} (${upstream[$n]})"
      ;;
    *) die "sources.txt: $n has unknown kind ${kind[$n]}" ;;
  esac
}

# export_source NAME DEST: the pinned tree of NAME into DEST (fresh), through
# a temporary index (read-tree + checkout-index), so that a repository that
# lacks some blobs of the commit (a partial or filtered clone) still exports
# everything it has. Each missing file is named on stderr and recorded in
# PREFIX/missing-files.txt (the manifest lists them); a full clone has none.
# Whether the build needs a missing file is found by the build itself; the
# one known case (newlib/Makefile.in) is regenerated below.
export_source() {
  local n=$1 dest=$2 gitdir index missing
  gitdir=$(git -C "$(src_path "$n")" rev-parse --absolute-git-dir)
  index=$(mktemp)
  rm -rf "$dest"
  mkdir -p "$dest"
  GIT_DIR=$gitdir GIT_INDEX_FILE=$index git read-tree "${pin[$n]}"
  # ls-files -s: "mode sha stage<TAB>path"; gitlinks (submodules, mode
  # 160000) have no blob. cat-file --batch-check prints the type per line,
  # or "<sha> missing" (then without the custom format).
  GIT_DIR=$gitdir GIT_INDEX_FILE=$index git ls-files -s | awk '$1 != "160000"' >"$index.ls"
  missing=$(cut -d' ' -f2 "$index.ls" | GIT_DIR=$gitdir git cat-file --batch-check='%(objecttype)' |
            paste -d'\t' - <(cut -f2- "$index.ls") | awk -F'\t' '$1 ~ / missing$/ { print $2 }')
  rm -f "$index.ls"
  if [ -n "$missing" ]; then
    echo "$missing" | while read -r path; do
      echo "device-toolchain: $n: $path is not in $(src_path "$n") (commit ${pin[$n]}); exported without it" >&2
      echo "$n $path" >>"$prefix/missing-files.txt"
      GIT_DIR=$gitdir GIT_INDEX_FILE=$index git update-index --force-remove -- "$path"
    done
  fi
  GIT_DIR=$gitdir GIT_INDEX_FILE=$index git checkout-index -a --prefix="$dest/"
  rm -f "$index"
}

apply_patch() {  # apply_patch DIR PATCH [-pN]
  local dir=$1 patch=$2 level=${3:--p1}
  patch -d "$dir" "$level" --forward --batch --quiet <"$patch" || die "patch $(basename "$patch") does not apply in $dir"
}

stamp() { touch "$prefix/.stamps/$1"; }
done_already() { [ -f "$prefix/.stamps/$1" ]; }
timed() {  # timed STAMP COMMAND...: run unless stamped; record the wall time
  local s=$1; shift
  if done_already "$s"; then echo "== $s: already built (rm $prefix/.stamps/$s to redo)"; return; fi
  echo "== $s ($(date -u +%H:%M:%S) UTC)"
  local t0=$SECONDS
  "$@"
  echo "$s $((SECONDS - t0))" >>"$prefix/.stamps/times"
  echo "== $s: $((SECONDS - t0)) s"
  stamp "$s"
}
log_run() {  # log_run LOG COMMAND...: output to PREFIX/logs/LOG; its tail on failure
  local log=$prefix/logs/$1; shift
  if ! "$@" >>"$log" 2>&1; then
    tail -40 "$log" >&2
    die "failed: $* (log: $log)"
  fi
}

stage_check() {
  for n in "${names[@]}"; do check_source "$n"; done
  for t in patch make gcc g++ git tar xz makeinfo bison flex meson ninja pkg-config python3; do
    command -v "$t" >/dev/null || die "$t is not installed (docs/device-toolchain.md lists the Debian packages)"
  done
  echo "all ${#names[@]} sources hold their pinned commit / sha256"
}

# -------------------------------------------------------- GCC / binutils / newlib
# Options after Espressif's crosstool-NG samples (samples/xtensa-<chip>-elf),
# minus what GCC 12 lacks; see docs/device-toolchain.md.
build_binutils() {
  local chip=$1 T=xtensa-$1-elf P=$prefix/xtensa-$1-elf s=$work/$1/binutils b=$work/$1/binutils-build
  export_source binutils "$s"
  cp -r "$work/overlays/xtensa_$chip/binutils/." "$s/"
  rm -rf "$b"; mkdir -p "$b"
  (cd "$b" && log_run "$chip-binutils.log" "$s/configure" --target="$T" --prefix="$P" --disable-nls \
     --disable-werror --disable-gdb --disable-gdbserver --disable-sim --disable-readline --disable-gprof \
     --disable-gold --enable-plugins --with-system-zlib --disable-multilib &&
   log_run "$chip-binutils.log" make -j"$jobs" && log_run "$chip-binutils.log" make install)
}

gcc_tree() {  # the patched GCC source for CHIP
  local chip=$1 s=$work/$1/gcc
  rm -rf "$s"; mkdir -p "$s"
  tar -xJf "$(src_path gcc)" -C "$s" --strip-components=1
  apply_patch "$s" "$(src_path gcc-gfdl-build.diff)" -p2
  apply_patch "$s" "$here/patches/gcc-12-xtensa-elf-specs.patch"
  cp -r "$work/overlays/xtensa_$chip/gcc/." "$s/"
}

gcc_common() {
  echo --target="xtensa-$1-elf" --prefix="$prefix/xtensa-$1-elf" --with-local-prefix="$prefix/xtensa-$1-elf/xtensa-$1-elf" \
    --with-newlib --disable-shared --disable-__cxa_atexit --disable-libgomp --disable-libssp --disable-libquadmath \
    --enable-target-optspace --without-long-double-128 --disable-nls
}

build_gcc_stage1() {
  local chip=$1 s=$work/$1/gcc b=$work/$1/gcc-stage1
  gcc_tree "$chip"
  rm -rf "$b"; mkdir -p "$b"
  # shellcheck disable=SC2046
  (cd "$b" && log_run "$chip-gcc-stage1.log" "$s/configure" $(gcc_common "$chip") --without-headers \
     --enable-threads=no --enable-languages=c --disable-lto \
     CFLAGS_FOR_TARGET=-mlongcalls CXXFLAGS_FOR_TARGET=-mlongcalls &&
   log_run "$chip-gcc-stage1.log" make -j"$jobs" all-gcc && log_run "$chip-gcc-stage1.log" make install-gcc)
}

newlib_tree() {
  local chip=$1 s=$work/$1/newlib
  export_source newlib "$s"
  apply_patch "$s" "$here/patches/newlib-esp-per-chip-triplets.patch"
  if [ ! -f "$s/newlib/Makefile.in" ]; then
    # A repository without newlib/Makefile.in (seen in the snapshot the
    # recipe was made with): regenerate it with the autotools newlib 4.3.0
    # uses (autoconf 2.69; automake 1.16 instead of 1.15, hence aclocal.m4
    # and configure too). The two SHORTNAME lines keep automake 1.16's
    # object names those MATHOBJS_IN_LIBC lists (libc_a-*.o, libm_a-*.o).
    sed -i '/^AUTOMAKE_OPTIONS = dejagnu/a libc_a_SHORTNAME = libc_a\nlibm_a_SHORTNAME = libm_a' "$s/newlib/Makefile.am"
    (cd "$s/newlib" && export AUTOCONF=autoconf2.69 AUTOM4TE=autom4te2.69 AUTOHEADER=autoheader2.69 &&
     log_run "$chip-newlib.log" aclocal -I . -I .. -I ../config && log_run "$chip-newlib.log" autoconf2.69 &&
     log_run "$chip-newlib.log" automake --foreign Makefile)
  fi
  # The chip's core configuration for newlib's Xtensa assembly (memcpy,
  # setjmp...): without it newlib is built for the overlay-less default core.
  cp -r "$work/overlays/xtensa_$chip/newlib/." "$s/"
}

build_newlib() {
  local chip=$1 T=xtensa-$1-elf P=$prefix/xtensa-$1-elf s=$work/$1/newlib
  newlib_tree "$chip"
  local b=$work/$1/newlib-nano
  rm -rf "$b"; mkdir -p "$b"
  (cd "$b" && log_run "$chip-newlib.log" "$s/configure" --target="$T" --prefix="$b/install" --enable-multilib \
     --disable-newlib-io-c99-formats --disable-newlib-supplied-syscalls --enable-newlib-nano-formatted-io \
     --enable-newlib-reent-small --enable-target-optspace --enable-newlib-nano-malloc \
     --enable-newlib-retargetable-locking --disable-newlib-wide-orient --enable-newlib-iconv \
     --enable-newlib-reent-binary-compat CFLAGS_FOR_TARGET=-mlongcalls &&
   log_run "$chip-newlib.log" make -j"$jobs" && log_run "$chip-newlib.log" make install)
  b=$work/$1/newlib-full
  rm -rf "$b"; mkdir -p "$b"
  (cd "$b" && log_run "$chip-newlib.log" "$s/configure" --target="$T" --prefix="$P" --enable-newlib-io-float \
     --disable-newlib-io-long-double --disable-newlib-supplied-syscalls --enable-newlib-io-pos-args \
     --enable-newlib-io-c99-formats --enable-newlib-io-long-long --disable-newlib-register-fini \
     --enable-newlib-nano-malloc --disable-newlib-nano-formatted-io --enable-newlib-atexit-dynamic-alloc \
     --enable-newlib-global-atexit --disable-lite-exit --enable-newlib-reent-small --enable-newlib-multithread \
     --enable-newlib-retargetable-locking --disable-newlib-wide-orient --enable-newlib-fseek-optimization \
     --enable-newlib-fvwrite-in-streamio --enable-newlib-unbuf-stream-opt --enable-target-optspace \
     --enable-newlib-iconv --enable-newlib-reent-binary-compat CFLAGS_FOR_TARGET=-mlongcalls &&
   log_run "$chip-newlib.log" make -j"$jobs" && log_run "$chip-newlib.log" make install)
  # ESP-IDF links newlib nano as libc_nano.a / libg_nano.a / libm_nano.a.
  local lib
  for lib in c g m; do
    cp "$work/$1/newlib-nano/install/$T/lib/lib$lib.a" "$P/$T/lib/lib${lib}_nano.a"
  done
}

build_gcc_final() {
  local chip=$1 s=$work/$1/gcc b=$work/$1/gcc-final
  rm -rf "$b"; mkdir -p "$b"
  # shellcheck disable=SC2046
  (cd "$b" && log_run "$chip-gcc-final.log" "$s/configure" $(gcc_common "$chip") \
     --with-headers="$prefix/xtensa-$chip-elf/xtensa-$chip-elf/include" \
     --enable-cxx-flags="-ffunction-sections -fdata-sections" --enable-lto --enable-long-long \
     --enable-languages=c,c++ --disable-libstdcxx-verbose --enable-threads=posix --enable-libstdcxx-time=yes \
     --with-pkgversion="GCC 12.2.0 from Debian gcc-12-source, Espressif xtensa_$chip overlay, for emulation (executorch-espnn tools/device-toolchain)" \
     CFLAGS_FOR_TARGET=-mlongcalls CXXFLAGS_FOR_TARGET=-mlongcalls &&
   log_run "$chip-gcc-final.log" make -j"$jobs" all && log_run "$chip-gcc-final.log" make install)
}

# ESP-IDF adds -mdisable-hardware-atomics to every compile of an ESP32-S3 (or
# ESP32) build with PSRAM (CONFIG_STDATOMIC_S32C1I_SPIRAM_WORKAROUND, default
# y with GCC, no prompt): Espressif's GCC then routes atomics through
# libcalls, because on silicon S32C1I does not work on PSRAM addresses. GCC
# 12 does not know the option. The emulator executes S32C1I on any address,
# so for emulation the wrappers drop the flag (ESP-IDF itself turns the
# workaround off for Clang). Everything else reaches the compiler unchanged.
install_wrappers() {
  local chip=$1 bin=$prefix/xtensa-$1-elf/bin tool
  for tool in gcc g++ c++; do
    local real=$bin/xtensa-$chip-elf-$tool
    [ -f "$real.real" ] || mv "$real" "$real.real"
    sed -e "s|@REAL@|$real.real|" "$here/emulation-compiler-wrapper.sh" >"$real"
    chmod +x "$real"
  done
}

build_toolchain() {
  local chip=$1
  if [ ! -d "$work/overlays" ]; then export_source xtensa-overlays "$work/overlays"; fi
  timed "$chip-binutils" build_binutils "$chip"
  export PATH=$prefix/xtensa-$chip-elf/bin:$PATH
  timed "$chip-gcc-stage1" build_gcc_stage1 "$chip"
  timed "$chip-newlib" build_newlib "$chip"
  timed "$chip-gcc-final" build_gcc_final "$chip"
  timed "$chip-wrappers" install_wrappers "$chip"
  # A smoke test: the S3 overlay is what makes the assembler know ee.* (PIE).
  printf 'int main(void) { return 0; }\n' >"$work/$chip-smoke.c"
  "xtensa-$chip-elf-gcc" -c -O2 "$work/$chip-smoke.c" -o "$work/$chip-smoke.o" ||
    die "the $chip compiler cannot compile an empty main"
  if [ "$chip" = esp32s3 ]; then
    printf '.text\nee.zero.q q0\n' | "xtensa-$chip-elf-as" -o "$work/$chip-pie.o" ||
      die "the esp32s3 assembler does not know the S3 vector instructions (overlay not applied?)"
  fi
}

# ------------------------------------------------------------ ExecuTorch
# The source tree scripts/build-executorch-esp.sh cross-builds for the
# runner's .pte mode (the build itself is per suite: a selective build of
# the portable kernels the suite's programs run on the CPU). Only the
# submodules that build reads.
build_executorch_src() {
  local s=$prefix/executorch
  export_source executorch "$s"
  export_source flatbuffers "$s/third-party/flatbuffers"
  export_source flatcc "$s/third-party/flatcc"
  # Added by ExecuTorch's CMake whatever is enabled (none is linked into the runner):
  export_source gflags "$s/third-party/gflags"
  export_source nlohmann-json "$s/third-party/json"
  export_source fxdiv "$s/backends/xnnpack/third-party/FXdiv"
}

# ------------------------------------------------------------------ QEMU
build_qemu() {
  local s=$work/qemu b=$work/qemu/build
  export_source qemu "$s"
  export_source keycodemapdb "$s/subprojects/keycodemapdb"
  export_source berkeley-softfloat-3 "$s/subprojects/berkeley-softfloat-3"
  export_source berkeley-testfloat-3 "$s/subprojects/berkeley-testfloat-3"
  # meson's overlay files for the two softfloat subprojects (what a wrap
  # download would have added).
  cp -r "$s/subprojects/packagefiles/berkeley-softfloat-3/." "$s/subprojects/berkeley-softfloat-3/"
  cp -r "$s/subprojects/packagefiles/berkeley-testfloat-3/." "$s/subprojects/berkeley-testfloat-3/"
  apply_patch "$s" "$here/patches/qemu-esp32-apb-ctrl-once.patch"
  (cd "$s" && log_run qemu.log ./configure --prefix="$prefix/qemu" --target-list=xtensa-softmmu --enable-gcrypt \
     --enable-slirp --enable-plugins --disable-strip --disable-user --disable-capstone --disable-vnc --disable-sdl \
     --disable-gtk --disable-docs --disable-download --disable-tools --disable-guest-agent &&
   log_run qemu.log ninja -C build -j"$jobs" qemu-system-xtensa trace/trace-events-all &&
   log_run qemu.log meson install -C build --no-rebuild)
  # (Only the emulator and what `meson install` copies: the full build also
  # compiles tests/fp, which does not build against this testfloat.)
  "$prefix/qemu/bin/qemu-system-xtensa" -machine help | grep -q '^esp32s3 ' ||
    die "the QEMU built has no esp32s3 machine"
}

# -------------------------------------------------------------- ESP-IDF
build_idf() {
  local idf=$prefix/esp-idf
  export_source esp-idf "$idf"
  rm -rf "$idf/examples" "$idf/docs"  # not read by any build; 40 % of the tree
  export_source esp-mqtt "$idf/components/mqtt/esp-mqtt"
  export_source cmock "$idf/components/cmock/CMock"
  export_source unity "$idf/components/unity/unity"
  export_source micro-ecc "$idf/components/bootloader/subproject/components/micro-ecc/micro-ecc"
  export_source tlsf "$idf/components/heap/tlsf"
  apply_patch "$idf/components/heap/tlsf" "$here/patches/tlsf-find-containing-block.patch"
  export_source mbedtls "$idf/components/mbedtls/mbedtls"
  export_source mbedtls-framework "$idf/components/mbedtls/mbedtls/framework"
  rm -rf "$idf/components/mbedtls/mbedtls/tests"
  export_source esp-nn "$prefix/esp-nn"
  # ESP-IDF's Python environment, from PyPI (idf.py refuses to run without
  # the constraints file its installer would have downloaded: written here
  # from what was installed).
  local venv=$prefix/python-env
  rm -rf "$venv"
  log_run idf-python.log python3 -m venv "$venv"
  log_run idf-python.log "$venv/bin/pip" install -r "$idf/tools/requirements/requirements.core.txt" \
    "esp-idf-kconfig~=2.5.0" "idf-component-manager~=2.2"
  mkdir -p "$prefix/idf-tools"
  local v
  v=$(sed -n 's/^#define ESP_IDF_VERSION_MAJOR *\([0-9]*\).*/\1/p' "$idf/components/esp_common/include/esp_idf_version.h").$(
      sed -n 's/^#define ESP_IDF_VERSION_MINOR *\([0-9]*\).*/\1/p' "$idf/components/esp_common/include/esp_idf_version.h")
  "$venv/bin/pip" freeze >"$prefix/idf-tools/espidf.constraints.v$v.txt"
}

write_env() {
  local path="" c
  for c in $chips; do path="$prefix/xtensa-$c-elf/bin:$path"; done
  cat >"$prefix/env.sh" <<EOF
# Written by tools/device-toolchain/build.sh: what ESP-IDF's export.sh would
# set, for this emulation tool chain. Source it, or set ESPNN_DEVICE_PREFIX
# for tests/idf and benchmarks/emulated.py (they read env.json).
export IDF_PATH=$prefix/esp-idf
export IDF_TOOLS_PATH=$prefix/idf-tools
export IDF_PYTHON_ENV_PATH=$prefix/python-env
export PATH=$path$prefix/python-env/bin:$prefix/esp-idf/tools:\$PATH
export ESPNN_QEMU_ESP=$prefix/qemu/bin/qemu-system-xtensa
export ESPNN_DIR=$prefix/esp-nn
export ESPNN_IDF_EXTRA_DEFAULTS=$prefix/emulation.defaults
export ESPNN_EXECUTORCH_SRC=$prefix/executorch
# No component registry: a download attempt fails loudly.
export IDF_COMPONENT_REGISTRY_URL=http://127.0.0.1:9
EOF
  cp "$here/emulation.defaults" "$prefix/emulation.defaults"
  python3 - "$prefix" <<'EOF'
import json, re, sys
prefix = sys.argv[1]
env = {}
for line in open(f"{prefix}/env.sh"):
    m = re.match(r"export (\w+)=(.*)$", line.strip())
    if m:
        env[m.group(1)] = m.group(2)
json.dump(env, open(f"{prefix}/env.json", "w"), indent=1)
EOF
}

write_manifest() {
  write_env
  python3 "$here/manifest.py" --prefix "$prefix" --sources-txt "$here/sources.txt" --patches "$here/patches" \
    --chips "$chips" $(for n in "${names[@]}"; do printf -- '--source %s=%s ' "$n" "$(src_path "$n")"; done)
  echo "manifest: $prefix/manifest.json"
}

t_all=$SECONDS
for s in $stages; do
  case "$s" in
    check) stage_check ;;
    toolchain) for c in $chips; do build_toolchain "$c"; done ;;
    qemu) timed qemu build_qemu ;;
    idf) timed idf build_idf ;;
    executorch) timed executorch build_executorch_src ;;
    manifest) write_manifest ;;
    *) die "unknown stage $s" ;;
  esac
done
echo "device-toolchain: done in $((SECONDS - t_all)) s; export ESPNN_DEVICE_PREFIX=$prefix"
