"""The chips a program is compiled for (``--target``, the ``target`` compile
spec): what the reports may say about each. The one place for these figures.

``internal_data_ram_bytes`` is the chip's internal SRAM on the data bus, the
most an application could give to ExecuTorch's planned buffers in internal
RAM (the runner app allocates them there unless
``ESPNN_RUNNER_PTE_POOLS_PSRAM`` moves them to PSRAM). A real application has
less free: its static data, IRAM code (on the ESP32-S3 the same SRAM),
stacks and Wi-Fi take their share. A plan above this figure cannot run from
internal RAM at all; the reports flag it.

* ESP32: 320 KiB of DRAM, ESP-IDF v5.5.5 Programming Guide, API Guides >
  Memory Types ("520 KB of available SRAM (320 KB of DRAM and 200 KB of
  IRAM) on the ESP32").
* ESP32-S3: 480 KiB, the internal SRAM reachable on the data bus, from
  ``SOC_DRAM_LOW`` 0x3FC88000 to ``SOC_DRAM_HIGH`` 0x3FD00000 in ESP-IDF
  v5.5.5 ``components/soc/esp32s3/include/soc/soc.h`` (of the 512 KB of SRAM
  in the ESP32-S3 datasheet; the rest serves the instruction cache).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str  # the compile spec value
    chip: str  # as Espressif writes it
    internal_data_ram_bytes: int
    ram_source: str  # where the figure comes from
    s3_simd: bool  # ESP-NN's ESP32-S3 vector kernels apply (analysis.s3_dispatch)
    kernels: str  # what ESP-NN runs there, one phrase


TARGETS = {
    "esp32s3": Target("esp32s3", "ESP32-S3", 480 * 1024,
                      "ESP-IDF v5.5.5 soc/esp32s3/include/soc/soc.h, SOC_DRAM_LOW..SOC_DRAM_HIGH", True,
                      "ESP-NN's ESP32-S3 SIMD kernels where its dispatch rules allow"),
    "esp32": Target("esp32", "ESP32", 320 * 1024,
                    "ESP-IDF v5.5.5 API Guides, Memory Types: 320 KB of DRAM", False,
                    "ESP-NN's generic C kernels (the ESP32 has no vector unit: ESP32-S3 SIMD shares do not apply)"),
}
DEFAULT = "esp32s3"  # the runtime's default when a payload records no target


def lookup(name: str | None) -> Target | None:
    """The Target of a compile spec value (None, not recorded: the runtime's
    default); None for a name this version does not know."""
    return TARGETS.get(name or DEFAULT)


def planned_memory_over(planned_bytes: int | None, name: str | None) -> bool | None:
    """Whether ExecuTorch's planned memory is more than the target's internal
    data RAM; None when either is unknown (a .pte whose payloads record no
    target, or none of it planned)."""
    if planned_bytes is None or name not in TARGETS:
        return None
    return planned_bytes > TARGETS[name].internal_data_ram_bytes


def planned_memory_excess(planned_bytes: int | None, name: str | None) -> str | None:
    """The warning when planned_memory_over, else None."""
    if not planned_memory_over(planned_bytes, name):
        return None
    t = TARGETS[name]
    return (f"ExecuTorch's planned memory, {planned_bytes:,} B, is more than the {t.chip}'s "
            f"{t.internal_data_ram_bytes:,} B of internal data RAM ({t.ram_source}): the program cannot run from "
            "internal RAM. These buffers hold the tensors outside the delegates (the CPU ops' inputs and "
            "outputs): delegate more of the model, or give the app PSRAM (ESPNN_RUNNER_PTE_POOLS_PSRAM)")
