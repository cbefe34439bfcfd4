"""Where the runner app puts a payload's memory on an ESP32-S3 with 512 KB of
SRAM and 8 MB of PSRAM (the board sdkconfig.defaults.esp32s3 describes): the
compile report's ``s3_placement`` section.

The rule is the device code's, reached through the binding: the runner
allocates arena, ESP-NN scratch and the fused regions' data in
``_native.RUNNER_ALLOCATION_ORDER``, each from internal RAM first and from
PSRAM when it does not fit (``ESPNN_MEMORY_INTERNAL_FIRST``, the memory
source sdkconfig.defaults.esp32s3 selects; tests/cli/test_s3_placement.py
holds the two together). ``_native.predict_placement`` applies it.

What it needs from the chip is how much internal RAM an app can still give
one block. Not the 512 KB of the datasheet: the S3's SRAM also holds the
instruction cache, IRAM code, static data, task stacks and ESP-IDF's 32 KiB
internal reserve for PSRAM builds. It was measured on the runner app
(ESP-IDF v5.5.5, the build of docs/device-evidence.json) under Espressif's
QEMU: cases whose only memory is an arena of a chosen size, in 16-byte
steps, and the runner's ``arena_mem=`` field of each (docs/s3-placement.json
keeps the run; docs/memory.md the commands). An application with more
static data, tasks or Wi-Fi has less.
"""

from __future__ import annotations

from . import _native

CHIP = "ESP32-S3"
SRAM_BYTES = 512 * 1024  # ESP32-S3 datasheet
PSRAM_BYTES = 8 * 1024 * 1024  # the N8R8 boards of sdkconfig.defaults.esp32s3 (octal PSRAM)
MEMORY_SOURCE = "INTERNAL_FIRST"  # sdkconfig.defaults.esp32s3: CONFIG_ESPNN_MEMORY_INTERNAL_FIRST=y
# The largest arena the runner still placed in internal RAM (278,512 B went
# to PSRAM): docs/s3-placement.json, "internal_budget".
INTERNAL_BUDGET_BYTES = 278_496
BUDGET_SOURCE = ("measured: the largest arena the runner app (ESP-IDF v5.5.5, esp32s3 defaults) placed in internal "
                 "RAM on Espressif's QEMU, in 16-byte steps (docs/s3-placement.json)")
SCRATCH_NOTE = ("scratch: this host build's figure (ANSI kernels); the ESP32-S3 build's ESP-NN scratch is larger "
                "(the runner's scratch= field). It goes to internal RAM if it is at most internal_left_before bytes")


def payload_placement(payload: dict) -> list[dict]:
    """The runner's blocks for one payload (a report payload dict), in allocation order."""
    return _native.predict_placement(payload["arena_bytes"], payload["scratch_bytes"], payload["persistent_bytes"],
                                     MEMORY_SOURCE, True, INTERNAL_BUDGET_BYTES)


def section(methods: dict, target: str | None) -> dict | None:
    """The report's s3_placement section (None unless the target is the ESP32-S3)."""
    if target != "esp32s3":
        return None
    parts = [{"method": name, "partition": p["index"], "blocks": payload_placement(p["payload"])}
             for name, m in methods.items() for p in m["partitions"] if p["payload"]]
    return {"chip": CHIP, "sram_bytes": SRAM_BYTES, "psram_bytes": PSRAM_BYTES,
            "memory_source": f"ESPNN_MEMORY_{MEMORY_SOURCE}", "internal_budget_bytes": INTERNAL_BUDGET_BYTES,
            "budget_source": BUDGET_SOURCE, "allocation_order": list(_native.RUNNER_ALLOCATION_ORDER),
            "scratch_note": SCRATCH_NOTE, "partitions": parts}


def lines(s: dict | None) -> list[str]:
    """The text summary's lines for the section."""
    if s is None:
        return []
    out = [f"placement on an {s['chip']} ({s['sram_bytes'] // 1024} KB SRAM, {s['psram_bytes'] // 2**20} MB PSRAM; "
           f"{s['memory_source']}: internal RAM first, {s['internal_budget_bytes']:,} B free for one block, measured):"]
    for p in s["partitions"]:
        cells = []
        for b in p["blocks"]:
            if b["block"] == "scratch":
                cells.append(f"scratch internal if the S3 build's is <= {b['internal_left_before']:,} B")
            elif b["memory"] != "none":
                cells.append(f"{b['block']} {b['bytes']:,} B -> {b['memory']}")
        out.append(f"  {p['method']} partition {p['partition']}: " + "; ".join(cells))
    return out
