#!/bin/sh
# Emulation-only compiler wrapper (tools/device-toolchain/build.sh installs it
# in place of xtensa-<chip>-elf-gcc/g++/c++, the compiler itself next to it as
# *.real). It drops -mdisable-hardware-atomics, which ESP-IDF adds for PSRAM
# builds (CONFIG_STDATOMIC_S32C1I_SPIRAM_WORKAROUND) and which GCC 12 does
# not know: on silicon S32C1I fails on PSRAM addresses, under QEMU it does
# not. ESP-IDF passes most flags in response files (@build/toolchain/cflags):
# a response file holding the flag is replaced by a filtered copy for this
# call. Every other argument is passed on unchanged.
real=@REAL@
flag=-mdisable-hardware-atomics
tmps=""
for arg do
  shift
  [ "$arg" = "$flag" ] && continue
  case "$arg" in
    @*)
      file=${arg#@}
      if [ -f "$file" ] && grep -q -- "$flag" "$file"; then
        copy=$(mktemp)
        sed "s/\(^\|[[:space:]]\)$flag\([[:space:]]\|\$\)/\1\2/g" "$file" >"$copy"
        tmps="$tmps $copy"
        arg=@$copy
      fi
      ;;
  esac
  set -- "$@" "$arg"
done
if [ -z "$tmps" ]; then
  exec "$real" "$@"
fi
"$real" "$@"
status=$?
# shellcheck disable=SC2086
rm -f $tmps
exit $status
