"""examples/esp32s3_camera is documentation-only (never built or run: no
ESP-IDF, no board). What can be checked here is checked: the README says so;
the manifests parse and name components that exist; every Kconfig symbol
the defaults set is declared; the files CMake embeds are the ones
export_model.py writes; export_model.py runs; the preprocessing C++ matches
PyTorch; main.cpp compiles (-fsyntax-only) against the real ExecuTorch
headers with stand-in ESP-IDF declarations. None of this is an ESP-IDF build."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import toolchain

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples/esp32s3_camera"
STUBS = Path(__file__).resolve().parent / "camera_stubs"  # esp32-camera
IDF_STUBS = Path(__file__).resolve().parents[1] / "firmware" / "idf_stubs"  # shared with the glue check
yaml = pytest.importorskip("yaml")


def kconfig_symbols(path: Path) -> set[str]:
    return set(re.findall(r"^\s*(?:config|menuconfig|choice)\s+(\w+)", path.read_text(), re.M))


def test_readme_says_it_was_never_built_or_run():
    text = " ".join(APP.joinpath("README.md").read_text().replace("\n>", "\n").split())
    assert "never been built and never been run" in text
    assert "no figure in this directory was measured on a device" in text
    assert "NEVER BUILT" in APP.joinpath("CMakeLists.txt").read_text()
    assert "HAS NEVER BEEN BUILT OR RUN" in APP.joinpath("main/main.cpp").read_text()


def test_manifest_names_the_camera_driver_and_our_component():
    manifest = yaml.safe_load(APP.joinpath("main/idf_component.yml").read_text())
    deps = manifest["dependencies"]
    assert "espressif/esp32-camera" in deps
    ours = deps["executorch-espnn/espnn_runtime"]
    component = (APP / "main" / ours["override_path"]).resolve()
    assert component == REPO / "components/espnn_runtime"
    published = yaml.safe_load((component / "idf_component.yml").read_text())
    # The version range admits the component's own version.
    major, minor, _ = (int(v) for v in published["version"].split("."))
    assert ours["version"] == f"^{major}.{minor}.0"
    # Same registry name as the component's own example uses.
    hello = yaml.safe_load((component / "examples/hello/main/idf_component.yml").read_text())
    assert "executorch-espnn/espnn_runtime" in hello["dependencies"]


def test_sdkconfig_defaults_set_only_declared_symbols():
    declared = (kconfig_symbols(REPO / "components/espnn_runtime/Kconfig")
                | kconfig_symbols(APP / "main/Kconfig.projbuild"))
    lines = [ln for ln in APP.joinpath("sdkconfig.defaults").read_text().splitlines()
             if ln.startswith("CONFIG_ESPNN_")]
    assert lines
    for line in lines:
        name = line.split("=")[0][len("CONFIG_"):]
        assert name in declared, f"sdkconfig.defaults sets {name}, which no Kconfig declares"
    used = set(re.findall(r"CONFIG_(ESPNN_CAMERA_\w+)", APP.joinpath("main/main.cpp").read_text()))
    assert used and used <= kconfig_symbols(APP / "main/Kconfig.projbuild")


def test_cmake_sources_exist_and_embedded_files_are_what_export_writes():
    cmake = APP.joinpath("main/CMakeLists.txt").read_text()
    for src in re.search(r'SRCS ((?:"[^"]+"\s*)+)', cmake).group(1).split():
        assert (APP / "main" / src.strip('"')).is_file(), src
    embedded = set(re.findall(r'EMBED_(?:TXT)?FILES "([^"]+)"', cmake))
    assert embedded == {"model.pte", "labels.txt"}
    export = APP.joinpath("export_model.py").read_text()
    ignored = APP.joinpath(".gitignore").read_text().split()
    for name in embedded:
        assert f'"{name}"' in export and f"main/{name}" in ignored
    # The symbols main.cpp reads are the ones ESP-IDF derives from those names.
    main_cpp = APP.joinpath("main/main.cpp").read_text()
    for sym in ("_binary_model_pte_start", "_binary_model_pte_end", "_binary_labels_txt_start"):
        assert sym in main_cpp


def test_normalization_constants_agree():
    main_cpp = APP.joinpath("main/main.cpp").read_text()
    text = APP.joinpath("export_model.py").read_text()
    mean = tuple(float(v) for v in re.search(r"MEAN = \(([^)]*)\)", text).group(1).split(","))
    std = tuple(float(v) for v in re.search(r"STD = \(([^)]*)\)", text).group(1).split(","))
    cpp_mean = tuple(float(v.rstrip("f")) for v in re.search(r"kMean\[3\] = \{([^}]*)\}", main_cpp).group(1).split(","))
    cpp_std = tuple(float(v.rstrip("f")) for v in re.search(r"kStd\[3\] = \{([^}]*)\}", main_cpp).group(1).split(","))
    assert mean == cpp_mean and std == cpp_std


def cxx():
    toolchain.require("c++")
    return next(shutil.which(c) for c in toolchain.CXX_COMPILERS if shutil.which(c))


@pytest.fixture(scope="module")
def preprocess_lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("pre") / "libpreprocess.so"
    subprocess.run([cxx(), "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    str(APP / "main/preprocess.cpp"), "-o", str(out)], check=True, capture_output=True)
    lib = ctypes.CDLL(str(out))
    lib.espnn_camera_rgb565_to_input.restype = ctypes.c_int
    return lib


@pytest.mark.parametrize("src,dst", [((40, 30), (16, 16)), ((320, 240), (96, 96)), ((8, 8), (20, 12))])
def test_preprocess_matches_pytorch_bilinear(preprocess_lib, src, dst):
    torch = pytest.importorskip("torch")
    import numpy as np

    (sw, sh), (dw, dh) = src, dst
    rng = np.random.default_rng(sw * dh)
    frame = rng.integers(0, 256, size=(sh, sw, 2), dtype=np.uint8)  # RGB565, high byte first
    v = (frame[..., 0].astype(np.int32) << 8) | frame[..., 1]
    rgb = np.stack([(v >> 11) / 31.0, ((v >> 5) & 0x3F) / 63.0, (v & 0x1F) / 31.0]).astype(np.float32)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    want = torch.nn.functional.interpolate(torch.from_numpy(rgb)[None], size=(dh, dw), mode="bilinear",
                                           align_corners=False, antialias=False)[0]
    want = ((want - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)).numpy()

    out = np.zeros((3, dh, dw), dtype=np.float32)
    f3 = ctypes.c_float * 3
    rc = preprocess_lib.espnn_camera_rgb565_to_input(
        np.ascontiguousarray(frame).ctypes.data_as(ctypes.c_void_p), sw, sh, out.ctypes.data_as(ctypes.c_void_p),
        dw, dh, f3(*mean), f3(*std))
    assert rc == 0
    assert np.abs(out - want).max() < 1e-3  # float32 rounding of the source coordinates


def test_preprocess_rejects_empty_sizes(preprocess_lib):
    f3 = ctypes.c_float * 3
    buf = (ctypes.c_uint8 * 8)()
    out = (ctypes.c_float * 3)()
    assert preprocess_lib.espnn_camera_rgb565_to_input(buf, 0, 2, out, 1, 1, f3(), f3(1, 1, 1)) == -1


def syntax_check(tmp_path, source: Path):
    spec = importlib.util.find_spec("executorch")
    et = Path(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else None
    if et is None or not (et / "include/executorch/runtime/executor/method.h").is_file():
        pytest.skip("the executorch wheel's C++ headers are not installed")
    (tmp_path / "sdkconfig.h").write_text("#define CONFIG_ESPNN_CAMERA_METHOD_POOL_KB 256\n"
                                          "#define CONFIG_ESPNN_CAMERA_TEMP_POOL_KB 64\n"
                                          "#define CONFIG_ESPNN_CAMERA_INTERVAL_MS 1000\n")
    args = [cxx(), "-std=gnu++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-fno-exceptions", "-fno-rtti",
            "-DC10_USING_CUSTOM_GENERATED_MACROS", f"-I{tmp_path}", f"-I{STUBS}", f"-I{IDF_STUBS}", f"-I{APP / 'main'}",
            "-isystem", str(et / "include"), "-isystem", str(et / "include/executorch/runtime/core/portable_type/c10"),
            str(source)]
    return subprocess.run(args, capture_output=True, text=True)


def test_main_compiles_against_executorch_headers(tmp_path):
    r = syntax_check(tmp_path, APP / "main/main.cpp")
    assert r.returncode == 0, r.stderr[-4000:]


def test_the_syntax_check_can_fail(tmp_path):
    bad = tmp_path / "bad.cpp"
    bad.write_text(APP.joinpath("main/main.cpp").read_text().replace("program->load_method(", "program->load_methodX("))
    r = syntax_check(tmp_path, bad)
    assert r.returncode != 0 and "load_methodX" in r.stderr


@pytest.mark.skipif(importlib.util.find_spec("idf_component_manager") is None,
                    reason="idf-component-manager is not installed (pip install idf-component-manager)")
def test_manifest_lints_clean():
    code = "import sys; from idf_component_manager.cli import safe_cli; sys.argv[0] = 'compote'; sys.exit(safe_cli())"
    r = subprocess.run([sys.executable, "-c", code, "manifest", "lint", str(APP / "main")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "ERROR" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_export_model_writes_the_files_the_app_embeds(load_example, tmp_path, capsys):
    pytest.importorskip("executorch")
    module = load_example("esp32s3_camera/export_model")
    code = module.main(["--model", "executorch_espnn.models:tiny_cnn", "--labels", ",".join("abcdefghij"),
                        "--calibration", "2", "--output-dir", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 0 and "export_model: OK" in text
    assert "vs quantized PyTorch: max" in text and "method forward:" in text
    assert b"EspNNBackend" in (tmp_path / "model.pte").read_bytes()
    assert (tmp_path / "labels.txt").read_text().split() == list("abcdefghij")
    with pytest.raises(SystemExit, match="labels"):
        module.main(["--model", "executorch_espnn.models:tiny_cnn", "--labels", "a,b", "--calibration", "1",
                     "--output-dir", str(tmp_path)])
