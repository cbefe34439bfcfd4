"""Selective build of the runtime: only the kernels of the listed ops are
referenced (ESPNN_OPS in CMake builds, Kconfig ESPNN_SELECT_OPS /
ESPNN_OP_<NAME> in ESP-IDF), and the parser refuses a model that uses an op
left out. The list for a program comes from executorch_espnn.selective.

The host build here links only DS-CNN's ops (taken from a real DS-CNN
program lowered by `espnn compile`): DS-CNN's payload runs and gives the
full runtime's outputs, a payload with any other op is refused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.scripts import load_script

from executorch_espnn import _native
from executorch_espnn import bundle as B
from executorch_espnn import selective

from .conftest import REPO

KCONFIG = REPO / "components/espnn_runtime/Kconfig"
REGISTRY = REPO / "components/espnn_runtime/src/ops/op_registry.cpp"
MODELS_FILE = REPO / "tests/idf/emulated_models.py"
KCONFIG_GENERATOR = REPO / "scripts/gen_kconfig_ops.py"


def _ops_by_opcode() -> list[str]:
    return sorted(_native.OPCODES, key=lambda n: _native.OPCODES[n]["opcode"])


def test_kconfig_has_one_switch_per_op_default_on():
    text = KCONFIG.read_text()
    switches = re.findall(r"^\s*config ESPNN_OP_(\w+)\n\s*bool \"(\w+)\"\n\s*default y$", text, re.M)
    assert [name for name, _ in switches] == _ops_by_opcode()
    assert all(name == prompt for name, prompt in switches)
    menu = text.split('menu "Ops linked into the runtime"')[1].split("endmenu")[0]
    assert "depends on ESPNN_SELECT_OPS" in menu.splitlines()[1]
    assert re.search(r"config ESPNN_SELECT_OPS\n\s*bool .*\n\s*default n", text)


def _kconfig_generator():
    return load_script(KCONFIG_GENERATOR)


def test_kconfig_op_switches_are_what_the_generator_writes():
    """Adding an opcode to xts3_format.h needs no hand edit of the Kconfig:
    scripts/gen_kconfig_ops.py writes the switches, and this fails until it
    was rerun."""
    text = KCONFIG.read_text()
    assert _kconfig_generator().generated(text, _native.OPCODES) == text, (
        "components/espnn_runtime/Kconfig: the op switches are not those of the format's opcodes; "
        "run PYTHONPATH=BUILD_DIR/pkg python scripts/gen_kconfig_ops.py")


def test_kconfig_generator_follows_a_new_opcode(tmp_path, capsys):
    """A format with one more opcode: --check reports the Kconfig out of date,
    a run writes the new switch last (opcode order) and --check passes."""
    gen = _kconfig_generator()
    top = max(d["opcode"] for d in _native.OPCODES.values())
    opcodes = {**_native.OPCODES, "NEW_OP": {"opcode": top + 1}}
    kconfig = tmp_path / "Kconfig"
    kconfig.write_text(KCONFIG.read_text())
    text = gen.generated(kconfig.read_text(), opcodes)
    switches = re.findall(r"^\s*config ESPNN_OP_(\w+)\n\s*bool \"(\w+)\"\n\s*default y$", text, re.M)
    assert [n for n, _ in switches] == _ops_by_opcode() + ["NEW_OP"]
    kconfig.write_text(text.replace('        config ESPNN_OP_CONV2D\n            bool "CONV2D"\n            default y\n\n', ""))
    assert gen.main(["--check", "--kconfig", str(kconfig)]) == 1
    assert "run scripts/gen_kconfig_ops.py" in capsys.readouterr().err
    assert gen.main(["--kconfig", str(kconfig)]) == 0 and gen.main(["--check", "--kconfig", str(kconfig)]) == 0
    assert kconfig.read_text() == KCONFIG.read_text()
    kconfig.write_text(KCONFIG.read_text().replace(gen.END, ""))
    with pytest.raises(ValueError, match="marker lines"):
        gen.main(["--kconfig", str(kconfig)])


def test_sdkconfig_lines_select_exactly_the_given_ops(tmp_path):
    pytest.importorskip("kconfgen")
    from .test_kconfig import resolve

    d = tmp_path / "defaults"
    d.write_text("\n".join(selective.sdkconfig_lines(["CONV2D", "RESHAPE"])) + "\n")
    c = resolve(tmp_path, d)
    assert c["ESPNN_SELECT_OPS"] == "1"
    assert {k[len("ESPNN_OP_"):] for k in c if k.startswith("ESPNN_OP_")} == {"CONV2D", "RESHAPE"}
    (tmp_path / "empty").write_text("")
    assert "ESPNN_SELECT_OPS" not in resolve(tmp_path, tmp_path / "empty")
    with pytest.raises(ValueError, match="CONV3D"):
        selective.sdkconfig_lines(["CONV3D"])


def _compile_registry(tmp_path: Path, ops: str | None, include_first: Path | None = None) -> subprocess.CompletedProcess:
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    runtime = REPO / "components/espnn_runtime"
    first = [f"-I{include_first}"] if include_first else []
    select = [f"-DESPNN_OPS=\"{ops}\""] if ops is not None else []
    return subprocess.run([cxx, "-std=gnu++17", "-c", "-o", str(tmp_path / "r.o"), "-Wall", "-Wextra", "-Werror",
                           *first, f"-I{runtime / 'include'}", f"-I{runtime / 'src'}", *select,
                           str(REGISTRY)], capture_output=True, text=True)


def test_a_misspelt_op_list_fails_the_build(tmp_path):
    assert _compile_registry(tmp_path, "CONV2D,RESHAPE").returncode == 0
    r = _compile_registry(tmp_path, "CONV2D,RESHAPEE")
    assert r.returncode != 0 and "ESPNN_OPS names an op" in r.stderr


def test_an_opcode_without_a_registry_row_fails_the_build(tmp_path):
    """op_registry.cpp's kernel rows are hand-written (each names its
    kernel); the build checks them against the format: a header with one
    more opcode does not compile until the registry has its row."""
    header = (REPO / "components/espnn_runtime/include/espnn/xts3_format.h").read_text()
    last = re.search(r"#define ESPNN_XTS3_OPS\(X\)(?:.*\\\n)*.*\)", header)  # up to the row without a backslash
    top = max(d["opcode"] for d in _native.OPCODES.values())
    grown = (header[:last.end()] + f" \\\n  X(NEW_OP, {top + 1}, 3, 1, 1, 1, 1, 0x0)" + header[last.end():]
             + "\n#define ESPNN_XTS3_PARAMS_NEW_OP(F)\n")
    (tmp_path / "espnn").mkdir()
    (tmp_path / "espnn/xts3_format.h").write_text(grown)
    assert _compile_registry(tmp_path, None).returncode == 0
    r = _compile_registry(tmp_path, None, include_first=tmp_path)
    assert r.returncode != 0 and "needs one row per opcode of ESPNN_XTS3_OPS" in r.stderr, r.stderr


def _symbols(obj: Path) -> str:
    return subprocess.run(["nm", "-C", str(obj)], capture_output=True, text=True, check=True).stdout


def test_unselected_kernels_are_not_referenced(tmp_path):
    """The registry of a selective build names only the selected kernels, so
    the linker's garbage collection can drop the rest."""
    if shutil.which("nm") is None:
        pytest.skip("nm not installed")
    assert _compile_registry(tmp_path, "CONV2D").returncode == 0
    syms = _symbols(tmp_path / "r.o")
    assert "kConv2dKernel" in syms and "kSoftmaxKernel" not in syms and "kAddKernel" not in syms


@pytest.fixture(scope="module")
def ds_cnn(tmp_path_factory) -> tuple[bytes, list[str]]:
    """DS-CNN lowered by `espnn compile`: its ESP-NN payload and its ops."""
    pytest.importorskip("executorch")
    d = tmp_path_factory.mktemp("ds_cnn")
    pte = d / "ds_cnn.pte"
    cli = [sys.executable, "-c", "from executorch_espnn.cli import main; raise SystemExit(main())"]
    r = subprocess.run([*cli, "compile", f"{MODELS_FILE}:ds_cnn", "-o", str(pte), "-q", "--verify-samples", "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    from executorch_espnn.partition.report import pte_payloads

    (payload,) = [blob for _m, _i, backend, blob in pte_payloads(pte.read_bytes()) if backend == "EspNNBackend"]
    ops = selective.program_ops(pte.read_bytes())
    assert ops == selective.payload_ops(payload) == selective.file_ops(pte)
    return payload, ops


def test_ds_cnn_uses_the_expected_ops(ds_cnn):
    _, ops = ds_cnn
    # DS-CNN's default (fused) schedule runs its convs in in-place band regions.
    assert ops == ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED", "AVG_POOL2D", "RESHAPE", "QUANTIZE",
                   "DEQUANTIZE", "BAND_LOOP"]


@pytest.fixture(scope="module")
def ds_cnn_only_tool(tmp_path_factory, ds_cnn) -> Path:
    """xts3_tool of a host build with -DESPNN_OPS=<DS-CNN's ops>."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    _, ops = ds_cnn
    build = tmp_path_factory.mktemp("selective")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    env = {k: v for k, v in os.environ.items() if k != "ESPNN_DIR"}
    for cmd in (["cmake", "-S", str(REPO / "host"), "-B", str(build), *gen, "-DCMAKE_BUILD_TYPE=Release",
                 "-DESPNN_BUILD_PYTHON=OFF", "-DESPNN_BUILD_TOOLS=ON", f"-DESPNN_OPS={';'.join(ops)}"],
                ["cmake", "--build", str(build), "--target", "xts3_tool", "-j", str(min(os.cpu_count() or 2, 2))]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return build / "xts3_tool"


def _run_tool(tool: Path, path: Path) -> list[str]:
    r = subprocess.run([str(tool), str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.rstrip("\n").split("\t")


def test_ds_cnn_only_build_runs_ds_cnn_bit_exactly(ds_cnn, ds_cnn_only_tool, tmp_path):
    payload, _ = ds_cnn
    feeds = B.default_inputs(payload, seed=3)
    blob = tmp_path / "ds_cnn.xts3"
    blob.write_bytes(payload)
    (tmp_path / "ds_cnn.xts3.in").write_bytes(b"".join(np.ascontiguousarray(f).tobytes() for f in feeds))
    fields = _run_tool(ds_cnn_only_tool, blob)
    assert fields[1] == "OK", fields
    want = [np.asarray(o).tobytes().hex() for o in _native.run(payload, feeds)]  # the full runtime
    assert fields[4:] == want


def test_ds_cnn_only_build_refuses_every_other_op(ds_cnn, ds_cnn_only_tool, tmp_path):
    """Each op-corpus graph that uses an op outside DS-CNN's list is refused
    at parse time, naming the first such op and how to add it."""
    from espnn_dev import op_corpus

    _, ops = ds_cnn
    refused = set()
    for name, blob in op_corpus.op_graphs():
        graph_ops = [op["op"] for op in _native.parse(blob)["ops"]]
        missing = [op for op in graph_ops if op not in ops]
        p = tmp_path / f"{name}.xts3"
        p.write_bytes(blob)
        fields = _run_tool(ds_cnn_only_tool, p)
        if not missing:
            assert fields[1] == "OK", (name, fields)
            continue
        assert fields[1] == "REJECT", (name, fields)
        first = missing[0]
        assert re.search(rf"op \d+ \({first}\): not compiled into this runtime \(selective build: add {first} "
                         rf"to ESPNN_OPS, or enable CONFIG_ESPNN_OP_{first}\)", fields[2]), fields[2]
        refused.add(first)
    assert refused, "the op corpus has no op outside DS-CNN's list"


def test_cli_lists_the_ops_of_payloads(tmp_path, capsys):
    """python -m executorch_espnn.selective on bare XTS3 payloads: the union
    of their ops in opcode order, as names, a CMake list or sdkconfig lines."""
    from espnn_dev import op_corpus

    paths = []
    for name, blob in op_corpus.op_graphs():
        paths.append(tmp_path / f"{name}.xts3")
        paths[-1].write_bytes(blob)
    want = [n for n in _ops_by_opcode() if n in op_corpus.opcodes_used()]
    assert selective.main([str(p) for p in paths]) == 0
    assert capsys.readouterr().out.split() == want
    assert selective.main([str(paths[0]), "--cmake"]) == 0
    assert capsys.readouterr().out.strip() == ";".join(selective.file_ops(paths[0]))
    assert selective.main([str(paths[0]), "--sdkconfig"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "CONFIG_ESPNN_SELECT_OPS=y" and len(lines) == 1 + len(_native.OPCODES)
    assert {ln.split("=")[0][len("CONFIG_ESPNN_OP_"):] for ln in lines[1:] if ln.endswith("=y")} == set(
        selective.file_ops(paths[0]))
