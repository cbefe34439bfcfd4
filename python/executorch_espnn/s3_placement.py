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
the runner. Not the 512 KB of the datasheet: the S3's SRAM also holds the
instruction cache, IRAM code, static data, task stacks and ESP-IDF's 32 KiB
internal reserve for PSRAM builds, and what is left is split into several
heaps. It was measured on the runner app (ESP-IDF v5.5.5, the build of
docs/device-evidence.json) under Espressif's QEMU with cases whose memory is
an arena, or an arena and an ESP-NN scratch, of chosen sizes in 16-byte
steps, reading the runner's ``arena_mem=`` / ``scratch_mem=`` fields: one
block of at most 278,496 B goes to internal RAM (278,512 B to PSRAM); once
an arena holds that big block, a second one of at most 31,712 B still does
(31,728 B to PSRAM). ESP-IDF's heap_caps tries its heaps smallest first, so
the prediction offers a block the 31,712 B first. docs/s3-placement.json
keeps the runs, docs/performance.md the commands. An application with more
static data, tasks or Wi-Fi has less; further small internal heaps are left
out, so a third block the prediction sends to PSRAM may still find one.

Each payload is predicted as the bundle runner runs it: alone, on the
internal RAM the runner finds. In a .pte the delegates' blocks are
allocated together at method load and share that RAM.
"""

from __future__ import annotations

from . import _native

CHIP = "ESP32-S3"
SRAM_BYTES = 512 * 1024  # ESP32-S3 datasheet
PSRAM_BYTES = 8 * 1024 * 1024  # the N8R8 boards of sdkconfig.defaults.esp32s3 (octal PSRAM)
MEMORY_SOURCE = "INTERNAL_FIRST"  # sdkconfig.defaults.esp32s3: CONFIG_ESPNN_MEMORY_INTERNAL_FIRST=y
# Free internal blocks at the runner's first allocation, in the order
# heap_caps tries them (smallest heap first): docs/s3-placement.json.
INTERNAL_FREE_BLOCKS = (31_712, 278_496)
BUDGET_SOURCE = ("measured: the largest blocks the runner app (ESP-IDF v5.5.5, esp32s3 defaults) placed in internal "
                 "RAM on Espressif's QEMU, in 16-byte steps (docs/s3-placement.json)")
SCRATCH_NOTE = ("scratch: this host build's figure (ANSI kernels); the ESP32-S3 build's ESP-NN scratch is larger "
                "(the runner's scratch= field). It goes to internal RAM if it is at most largest_internal_before bytes")


NAMES = {"arena": "arena", "regions": "region data"}


def payload_placement(payload: dict) -> list[dict]:
    """The runner's blocks for one payload (a report payload dict), in allocation order."""
    return _native.predict_placement(payload["arena_bytes"], payload["scratch_bytes"], payload["persistent_bytes"],
                                     MEMORY_SOURCE, True, list(INTERNAL_FREE_BLOCKS))


def section(methods: dict, target: str | None) -> dict | None:
    """The report's s3_placement section (None unless the target is the ESP32-S3)."""
    if target != "esp32s3":
        return None
    parts = [{"method": name, "partition": p["index"], "blocks": payload_placement(p["payload"])}
             for name, m in methods.items() for p in m["partitions"] if p["payload"]]
    return {"chip": CHIP, "sram_bytes": SRAM_BYTES, "psram_bytes": PSRAM_BYTES,
            "memory_source": f"ESPNN_MEMORY_{MEMORY_SOURCE}", "internal_free_blocks": list(INTERNAL_FREE_BLOCKS),
            "budget_source": BUDGET_SOURCE, "allocation_order": list(_native.RUNNER_ALLOCATION_ORDER),
            "scratch_note": SCRATCH_NOTE, "partitions": parts}


def lines(s: dict | None) -> list[str]:
    """The text summary's lines for the section."""
    if s is None:
        return []
    free = " B and ".join(f"{n:,}" for n in s["internal_free_blocks"])
    out = [f"placement on an {s['chip']} with {s['sram_bytes'] // 1024} KB SRAM and {s['psram_bytes'] // 2**20} MB "
           f"PSRAM ({s['memory_source']}: internal RAM first, PSRAM when a block does not fit; the runner finds "
           f"internal blocks of {free} B free):"]
    for p in s["partitions"]:
        cells = []
        for b in p["blocks"]:
            if b["block"] == "scratch":
                cells.append(f"ESP-NN scratch -> internal if the S3 build's is at most {b['largest_internal_before']:,} B")
            elif b["memory"] != "none":
                cells.append(f"{NAMES[b['block']]} {b['bytes']:,} B -> {b['memory']}")
        out.append(f"  {p['method']} partition {p['partition']}: " + "; ".join(cells))
    return out
