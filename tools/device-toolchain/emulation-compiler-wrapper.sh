#!/bin/sh
# Emulation-only compiler wrapper (tools/device-toolchain/build.sh installs it
# in place of xtensa-<chip>-elf-gcc/g++/c++, the compiler itself next to it as
# *.real). It drops -mdisable-hardware-atomics, which ESP-IDF adds for PSRAM
# builds (CONFIG_STDATOMIC_S32C1I_SPIRAM_WORKAROUND) and which GCC 12 does
# not know: on silicon S32C1I fails on PSRAM addresses, under QEMU it does
# not. Every other argument is passed on unchanged.
real=@REAL@
for arg do
  shift
  [ "$arg" = "-mdisable-hardware-atomics" ] && continue
  set -- "$@" "$arg"
done
exec "$real" "$@"
