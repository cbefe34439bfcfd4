"""tools/qemu-esp without QEMU: the flash image it assembles, the partition
table it reads, the QEMU command line (PSRAM size and mode from the build's
sdkconfig), and how it turns a console into an exit status. These run in CI;
the runs under QEMU themselves are tests/idf."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load():
    path = REPO / "tools/qemu-esp/qemu-esp"
    loader = importlib.machinery.SourceFileLoader("qemu_esp_tool", str(path))
    spec = importlib.util.spec_from_loader("qemu_esp_tool", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


Q = _load()


def _entry(label: str, ptype: int, sub: int, offset: int, size: int) -> bytes:
    return Q.PARTITION_ENTRY.pack(Q.PARTITION_MAGIC, ptype, sub, offset, size, label.encode().ljust(16, b"\0"), 0)


def _table(*entries: bytes) -> bytes:
    # ESP-IDF ends the table with an MD5 entry (magic 0xEBEB) and 0xFF padding.
    return b"".join(entries) + b"\xeb\xeb" + b"\xff" * 30 + b"\xff" * 64


def _fake_build(tmp_path: Path, sdk: dict, table: bytes, flash_size: str = "4MB") -> Path:
    build = tmp_path / "build"
    (build / "config").mkdir(parents=True)
    (build / "config/sdkconfig.json").write_text(json.dumps(sdk))
    (build / "bootloader").mkdir()
    (build / "bootloader/bootloader.bin").write_bytes(b"\xe9BOOT")
    (build / "partition_table").mkdir()
    (build / "partition_table/partition-table.bin").write_bytes(table)
    (build / "app.bin").write_bytes(b"\xe9APP" * 4)
    (build / "flasher_args.json").write_text(json.dumps({
        "flash_settings": {"flash_size": flash_size},
        "flash_files": {"0x0": "bootloader/bootloader.bin", "0x8000": "partition_table/partition-table.bin",
                        "0x10000": "app.bin"}}))
    return build


TABLE = _table(_entry("nvs", 1, 2, 0x9000, 0x6000), _entry("factory", 0, 0, 0x10000, 0x100000),
               _entry("bundle", 0x40, 0, 0x200000, 0x100000))


def test_partition_table_is_read_up_to_its_md5_entry():
    parts = Q.partitions(TABLE)
    assert [(p["label"], p["type"], p["offset"], p["size"]) for p in parts] == [
        ("nvs", 1, 0x9000, 0x6000), ("factory", 0, 0x10000, 0x100000), ("bundle", 0x40, 0x200000, 0x100000)]


def test_flash_image_places_every_file_and_the_bundle_in_its_partition(tmp_path):
    build = _fake_build(tmp_path, {"IDF_TARGET": "esp32s3"}, TABLE)
    image = Q.flash_image(build, b"XTSB-bundle")
    assert len(image) == 4 * 1024 * 1024
    assert image[:5] == b"\xe9BOOT" and image[5:16] == b"\xff" * 11
    assert image[0x8000:0x8000 + len(TABLE)] == TABLE
    assert image[0x10000:0x10010] == b"\xe9APP" * 4
    assert image[0x200000:0x20000b] == b"XTSB-bundle" and image[0x20000b] == 0xFF


def test_flash_image_honours_the_configured_partition_label(tmp_path):
    table = _table(_entry("factory", 0, 0, 0x10000, 0x100000), _entry("models", 0x40, 0, 0x300000, 0x1000))
    build = _fake_build(tmp_path, {"IDF_TARGET": "esp32", "ESPNN_RUNNER_PARTITION_LABEL": "models"}, table)
    assert Q.flash_image(build, b"abc")[0x300000:0x300003] == b"abc"


@pytest.mark.parametrize("change, message", [
    (dict(data=b"x" * 0x1001), "larger than partition 'models'"),
    (dict(label="other"), "no partition labelled 'other'"),
    (dict(flash_size="1MB"), "lies beyond the 1048576-byte flash"),  # a slice would have grown the image
    (dict(flash_size="32KB"), "does not fit a 32768-byte flash"),
])
def test_flash_image_refuses_what_would_not_fit(tmp_path, capsys, change, message):
    table = _table(_entry("factory", 0, 0, 0x10000, 0x1000), _entry("models", 0x40, 0, 0x300000, 0x1000))
    sdk = {"IDF_TARGET": "esp32s3", "ESPNN_RUNNER_PARTITION_LABEL": change.get("label", "models")}
    build = _fake_build(tmp_path, sdk, table, flash_size=change.get("flash_size", "4MB"))
    with pytest.raises(SystemExit) as e:
        Q.flash_image(build, change.get("data", b"abc"))
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_octal_psram_build_gets_octal_psram_of_the_default_size(tmp_path):
    cmd = Q.qemu_command(Path("/q"), {"IDF_TARGET": "esp32s3", "SPIRAM": True, "SPIRAM_MODE_OCT": True},
                         tmp_path / "f.bin")
    assert cmd[:3] == ["/q", "-M", "esp32s3"]
    i = cmd.index("-m")
    assert cmd[i + 1] == f"{Q.DEFAULT_PSRAM_MB}M"
    assert cmd[cmd.index("-global") + 1] == "driver=ssi_psram,property=is_octal,value=true"


def test_quad_psram_and_no_psram_builds(tmp_path):
    quad = Q.qemu_command(Path("/q"), {"IDF_TARGET": "esp32s3", "SPIRAM": True}, tmp_path / "f.bin", psram_mb=2)
    assert quad[quad.index("-m") + 1] == "2M" and "-global" not in quad
    none = Q.qemu_command(Path("/q"), {"IDF_TARGET": "esp32"}, tmp_path / "f.bin", icount_shift=2)
    assert "-m" not in none and none[none.index("-icount") + 1] == "shift=2,align=off,sleep=off"


def test_psram_build_without_psram_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        Q.qemu_command(Path("/q"), {"IDF_TARGET": "esp32s3", "SPIRAM": True}, tmp_path / "f.bin", psram_mb=0)
    assert "CONFIG_SPIRAM" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        Q.qemu_command(Path("/q"), {"IDF_TARGET": "esp32c3"}, tmp_path / "f.bin")


def _console(tmp_path, text: str, *, exit_code: int = 0, timeout: float = 30) -> int:
    script = tmp_path / "guest.py"
    script.write_text(f"import sys, time\nsys.stdout.write({text!r})\nsys.stdout.flush()\n"
                      f"time.sleep(0.3)\nsys.exit({exit_code})\n")
    return Q.console([sys.executable, str(script)], timeout)


@pytest.mark.parametrize("text, status", [
    ("ESPNN_BEGIN v=1 cases=1\nESPNN_RESULT v=1 case=a status=pass\nESPNN_END v=1 cases=1 passed=1 failed=0\n", 0),
    ("ESPNN_BEGIN v=1 cases=1\nESPNN_RESULT v=1 case=a status=fail\nESPNN_END v=1 cases=1 passed=0 failed=1\n", 1),
    ("ESPNN_BEGIN v=1 cases=2\nGuru Meditation Error: Core  0 panic'ed (LoadProhibited)\nBacktrace: 0x1\n", 4),
    ("ESPNN_BEGIN v=1 cases=2\nabort() was called at PC 0x42000000\n", 4),
    ("ESPNN_BEGIN v=1 cases=2\n", 3),  # the guest stopped without ESPNN_END
])
def test_console_status(tmp_path, capsys, text, status):
    assert _console(tmp_path, text) == status
    assert text.splitlines()[0] in capsys.readouterr().out  # the console is passed through


def test_console_timeout_without_end(tmp_path, capsys):
    script = tmp_path / "hang.py"
    script.write_text("import time\nprint('ESPNN_BEGIN v=1 cases=1', flush=True)\ntime.sleep(60)\n")
    assert Q.console([sys.executable, str(script)], 1.0) == 3
    assert "timeout after 1 s" in capsys.readouterr().err


def test_size_bytes():
    assert Q.size_bytes("4MB") == 4 << 20 and Q.size_bytes("512KB") == 512 << 10 and Q.size_bytes("16") == 16
    with pytest.raises(SystemExit):
        Q.size_bytes("4 GB")


def test_little_endian_entry_layout():
    # ESP-IDF's esp_partition_info_t: magic, type, subtype, offset, size, label[16], flags (32 bytes).
    assert Q.PARTITION_ENTRY.size == 32
    e = _entry("bundle", 0x40, 1, 0x1000, 0x2000)
    assert e[:4] == b"\xaa\x50\x40\x01" and struct.unpack_from("<II", e, 4) == (0x1000, 0x2000)


def _fake_qemu(tmp_path: Path) -> Path:
    """An executable standing in for QEMU: records its arguments and the
    flash image it was given, then prints a passing ESPNN_END line."""
    qemu = tmp_path / "qemu-system-xtensa"
    qemu.write_text(f"#!{sys.executable}\nimport json, re, sys\n"
                    f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
                    "flash = next(a for a in sys.argv if a.startswith('file='))[5:].split(',')[0]\n"
                    f"open({str(tmp_path / 'flash.bin')!r}, 'wb').write(open(flash, 'rb').read())\n"
                    "print('ESPNN_END v=1 cases=1 passed=1 failed=0', flush=True)\n")
    qemu.chmod(0o755)
    return qemu


def test_no_data_runs_an_app_without_a_bundle(tmp_path, capsys):
    # Another app than the runner (benchmarks/peer.py's peer) has no bundle partition to fill.
    build = _fake_build(tmp_path, {"IDF_TARGET": "esp32s3"}, TABLE)
    qemu = _fake_qemu(tmp_path)
    assert Q.main(["run", "--qemu", str(qemu), "--build", str(build), "--no-data", "--timeout", "30"]) == 0
    flash = (tmp_path / "flash.bin").read_bytes()
    assert flash[0x10000:0x10010] == b"\xe9APP" * 4 and flash[0x200000:0x200010] == b"\xff" * 16
    # Without it, a runner build still needs its bundle.
    with pytest.raises(SystemExit):
        Q.main(["run", "--qemu", str(qemu), "--build", str(build), "--timeout", "30"])
    assert "pass --bundle" in capsys.readouterr().err


@pytest.mark.parametrize("extra, symbol", [([], "espnn_pal_cycle_count"), (["--mark", "peer_mark"], "peer_mark")])
def test_icount_marks_the_named_function(tmp_path, monkeypatch, extra, symbol):
    build = _fake_build(tmp_path, {"IDF_TARGET": "esp32s3"}, TABLE)
    looked_up = []
    monkeypatch.setattr(Q, "symbol_address", lambda b, sdk, name: looked_up.append(name) or 0x42001234)
    monkeypatch.setattr(Q, "plugin", lambda qemu, cache: tmp_path / "icount_marks.so")
    out = tmp_path / "counts.txt"
    assert Q.main(["run", "--qemu", str(_fake_qemu(tmp_path)), "--build", str(build), "--no-data",
                   "--icount", str(out), *extra, "--timeout", "30"]) == 0
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert looked_up == [symbol]
    assert argv[argv.index("-plugin") + 1] == f"{tmp_path / 'icount_marks.so'},out={out.resolve()},mark=0x42001234"
    assert "-icount" in argv


def test_profile_sums_blocks_per_function_most_first(tmp_path):
    """--profile: the plugin's per-block counts are summed into the ELF function whose
    [start, start + size) holds the block's address; a block outside every function (ROM) is
    listed by its address; lines other than `block` are ignored."""
    icount = tmp_path / "icount.txt"
    icount.write_text("total 0 999\nmark 0 0x42000000 10\nblock 0x42000010 300\nblock 0x42000020 200\n"
                      "block 0x42000100 700\nblock 0x40056f44 50\nblock 0x42000040 5\n")
    table = [(0x42000000, 0x40, "esp_nn_conv"), (0x42000100, 0x10, "EvalQuantize")]
    out = tmp_path / "profile.txt"
    Q.write_profile(icount, table, out)
    lines = out.read_text().splitlines()
    assert lines[0].startswith("#") and "total 1255" in lines[0]
    assert [line.split()[::2] for line in lines[1:]] == [
        ["700", "EvalQuantize"], ["500", "esp_nn_conv"], ["50", "?0x40056f44"], ["5", "?0x42000040"]]
    assert lines[1].split()[1] == f"{100 * 700 / 1255:.2f}"


def test_profile_needs_icount(tmp_path, capsys):
    build = tmp_path / "build"
    build.mkdir()
    with pytest.raises(SystemExit):
        Q.main(["run", "--qemu", sys.executable, "--build", str(build), "--profile", str(tmp_path / "p.txt")])
    assert "--profile needs --icount" in capsys.readouterr().err
