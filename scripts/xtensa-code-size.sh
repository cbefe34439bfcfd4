#!/usr/bin/env bash
# Code size of the espnn_runtime component for the ESP32-S3 at -Os, without
# an ESP-IDF project build: every source the component's ESP-IDF build
# compiles by default (CMakeLists.txt with the Kconfig defaults: no
# ExecuTorch delegate, no et_pal_* hooks) cross-compiled with ESP-IDF's
# code-generation flags, then
#   archive: the sum of `size` over the component's objects, i.e. what the
#            component's static library holds;
#   linked:  what stays after --gc-sections when an application parses a
#            model, runs it and checks a .pte (a relocatable link rooted at
#            a small probe), i.e. what a user's binary carries. Both leave
#            out ESP-NN's kernels, libc and the ExecuTorch delegate.
#
#   scripts/xtensa-code-size.sh [--ops "CONV2D FULLY_CONNECTED ..."] [REPO]
#
# --ops is the selective build's op list (ESPNN_OPS, see docs/firmware.md);
# REPO defaults to this checkout (another checkout measures another commit).
# Needs the ESP32-S3 GCC (xtensa-esp32s3-elf-g++ on PATH or in
# /opt/xtensa-esp32s3-elf/bin) and ESP-NN's headers (ESPNN_DIR, default
# /opt/esp-nn-1.2.3). ESP-IDF's own headers are replaced by the stubs of
# tests/firmware/idf_stubs, which only declare what platform_esp_idf.cpp calls.
set -euo pipefail
ops=""
if [ "${1:-}" = "--ops" ]; then
  ops=$2
  shift 2
fi
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
espnn=${ESPNN_DIR:-/opt/esp-nn-1.2.3}
PATH=$PATH:/opt/xtensa-esp32s3-elf/bin
cxx=xtensa-esp32s3-elf-g++
size=xtensa-esp32s3-elf-size
comp=$repo/components/espnn_runtime
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ESP-IDF's sdkconfig.h with the component's Kconfig defaults that the
# sources read.
printf '#pragma once\n#define CONFIG_ESPNN_LOG_LEVEL 3\n#define CONFIG_IDF_TARGET "esp32s3"\n#define CONFIG_ESP_DEFAULT_CPU_FREQ_MHZ 240\n' >"$work/sdkconfig.h"
flags=(-Os -mlongcalls -ffunction-sections -fdata-sections -fno-exceptions -fno-rtti -std=gnu++17
       -DESP_PLATFORM -I"$work" -I"$here/tests/firmware/idf_stubs" -I"$comp/include" -I"$comp/src"
       -I"$espnn/include" -I"$espnn/src/common")
if [ -n "$ops" ]; then
  flags+=("-DESPNN_OPS=\"$ops\"")
fi

mapfile -t srcs < <(cd "$comp/src" && find . -name '*.cpp' ! -path './executorch/*' \
                    ! -name platform_host.cpp ! -name platform_et_pal.cpp | sort)
objs=()
for s in "${srcs[@]}"; do
  o=$work/obj/${s%.cpp}.o
  mkdir -p "$(dirname "$o")"
  "$cxx" "${flags[@]}" -c "$comp/src/$s" -o "$o"
  objs+=("$o")
done

cat >"$work/probe.cpp" <<'EOF'
// What an application of the component calls: parse, plan, run, check a .pte.
#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "espnn/pte_check.h"
extern "C" int espnn_size_probe(const void* blob, size_t n, void* arena, void* scratch) {
  static espnn::Model model;
  static espnn::Interpreter interp;
  if (!espnn::ParseModel(blob, n, &model).ok()) return 1;
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(model);
  if (!interp.Init(&model, arena, req.arena_bytes, scratch, req.scratch_bytes).ok()) return 2;
  if (!interp.Invoke().ok()) return 3;
  return espnn::pte::CheckProgram(blob, n).ok() ? 0 : 4;
}
EOF
"$cxx" "${flags[@]}" -c "$work/probe.cpp" -o "$work/probe.o"

echo "toolchain: $("$cxx" --version | head -1)"
echo "flags: -Os -mlongcalls -ffunction-sections -fdata-sections -fno-exceptions -fno-rtti"
echo "ops: ${ops:-all}"
echo "per object (text data bss):"
(cd "$work/obj" && "$size" $(printf '%s\n' "${objs[@]}" | sed "s|$work/obj/||")) | tail -n +2 |
  awk '{printf "  %-36s %7d %5d %5d\n", $6, $1, $2, $3}'
"$size" -t "${objs[@]}" | tail -1 | awk '{printf "archive: text %d data %d bss %d total %d\n", $1, $2, $3, $4}'
"$cxx" -nostdlib -Wl,-r -Wl,--gc-sections -Wl,-e,espnn_size_probe -o "$work/linked.o" \
  "$work/probe.o" "${objs[@]}"
"$size" "$work/linked.o" | tail -1 | awk '{printf "linked (gc-sections, probe included): text %d data %d bss %d total %d\n", $1, $2, $3, $4}'
