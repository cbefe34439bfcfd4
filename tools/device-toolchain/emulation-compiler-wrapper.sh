#!/bin/sh
# Emulation-only compiler wrapper (tools/device-toolchain/build.sh installs it
# in place of xtensa-<chip>-elf-gcc/g++/c++, the compiler itself next to it as
# *.real). It drops -mdisable-hardware-atomics, which ESP-IDF adds for PSRAM
# builds (CONFIG_STDATOMIC_S32C1I_SPIRAM_WORKAROUND) and which GCC 12 does
# not know: on silicon S32C1I fails on PSRAM addresses, under QEMU it does
# not. Its opposite, -mno-disable-hardware-atomics (ESP-IDF's own atomics
# sources), is GCC 12's default behaviour and is dropped too. ESP-IDF
# passes most flags in response files (@build/toolchain/cflags): a response
# file holding either is replaced by a filtered copy for this call. Every
# other argument is passed on unchanged.
real=@REAL@
flags="-mdisable-hardware-atomics -mno-disable-hardware-atomics"
tmps=""
for arg do
  shift
  case " $flags " in *" $arg "*) continue ;; esac
  case "$arg" in
    @*)
      file=${arg#@}
      if [ -f "$file" ] && grep -q -- "-m\(no-\)\{0,1\}disable-hardware-atomics" "$file"; then
        copy=$(mktemp)
        # (a loop: adjacent flags share the blank between them)
        sed -e ':a' -e "s/\(^\|[[:space:]]\)-m\(no-\)\{0,1\}disable-hardware-atomics\([[:space:]]\|\$\)/\1\3/" \
            -e 'ta' "$file" >"$copy"
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
