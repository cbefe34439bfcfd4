"""The ESP-IDF component as the registry will see it: `compote manifest lint`
on every manifest of the project, and `compote component pack` of
components/espnn_runtime, whose archive must hold the component's sources,
Kconfig, license and example, and nothing built or test-only. Both commands
work offline. Skipped when idf-component-manager is not installed in this
Python (pip install idf-component-manager; .ci/run does)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile

import pytest

from .conftest import REPO

COMPONENT = REPO / "components/espnn_runtime"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("idf_component_manager") is None,
                                reason="idf-component-manager is not installed (pip install idf-component-manager)")


def compote(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    code = "import sys; from idf_component_manager.cli import safe_cli; sys.argv[0] = 'compote'; sys.exit(safe_cli())"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_manifests_lint_clean():
    r = compote("manifest", "lint", "components/espnn_runtime", "main")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ERROR" not in r.stdout + r.stderr


def test_lint_catches_an_invalid_manifest(tmp_path):
    """The lint step in CI can fail: a tag shorter than 3 characters."""
    (tmp_path / "idf_component.yml").write_text('version: "0.1.0"\ntags:\n  - nn\n')
    r = compote("manifest", "lint", str(tmp_path))
    assert r.returncode != 0 and "tags" in r.stdout + r.stderr


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """Packs a copy of the component into which stray build outputs were
    dropped (the manifest's excludes must keep them out)."""
    work = tmp_path_factory.mktemp("pack")
    comp = work / "espnn_runtime"
    shutil.copytree(COMPONENT, comp)
    for stray in ("examples/hello/build/stray.o", "examples/hello/sdkconfig", "examples/hello/dependencies.lock",
                  "examples/hello/managed_components/espressif__esp-nn/x.c", "src/__pycache__/x.pyc", "bundle.bin",
                  "dist/old.tgz", "tests/test_x.py"):
        (comp / stray).parent.mkdir(parents=True, exist_ok=True)
        (comp / stray).write_text("stray")
    dist = work / "out"
    r = compote("component", "pack", "--name", "espnn_runtime", "--dest-dir", str(dist), cwd=comp)
    assert r.returncode == 0, r.stdout + r.stderr
    archives = list(dist.glob("espnn_runtime_*.tgz"))
    assert len(archives) == 1, list(dist.iterdir())
    with tarfile.open(archives[0]) as t:
        names = {n[2:] if n.startswith("./") else n for n in t.getnames()}
        manifest = t.extractfile("./idf_component.yml").read().decode()
    return names, manifest


def test_archive_contents(packed):
    names, _ = packed
    files = {n for n in names if "." in n.rsplit("/", 1)[-1] or n in ("LICENSE", "Kconfig")}
    for required in ("CMakeLists.txt", "sources.cmake", "idf_component.yml", "Kconfig", "LICENSE",
                     "include/espnn/xts3_format.h", "include/espnn/byte_reader.h", "include/espnn/platform.h",
                     "include/espnn/pte_check.h", "src/parser.cpp", "src/pte_check.cpp", "src/platform_esp_idf.cpp",
                     "src/platform_et_pal.cpp", "src/executorch/espnn_backend.cpp", "examples/hello/CMakeLists.txt",
                     "examples/hello/main/hello.cpp", "examples/hello/main/idf_component.yml"):
        assert required in files, (required, sorted(files))
    forbidden = [n for n in names if any(part in ("build", "tests", "__pycache__", "dist", "managed_components")
                                         for part in n.split("/"))
                 or n.endswith((".o", ".pyc", ".bin", "sdkconfig", "dependencies.lock"))]
    assert not forbidden, forbidden


def test_archive_holds_no_runner_code(packed):
    """The test rig's runner cores (components/espnn_test_runner) stay out
    of what users add to their firmware: no file of that component, and no
    file of the archive mentions the runners' entry points."""
    names, _ = packed
    runner = {p.name for p in (REPO / "components/espnn_test_runner").rglob("*")
              if p.is_file() and p.suffix in (".cpp", ".h")}
    assert {"bundle.cpp", "bundle_runner.cpp", "pte_suite.cpp", "pte_runner.cpp", "bundle.h"} <= runner
    leaked = sorted(n for n in names if n.rsplit("/", 1)[-1] in runner)
    assert not leaked, leaked


def test_component_sources_do_not_reach_for_the_runner():
    """Nothing of espnn_runtime includes a runner header or calls a runner core."""
    for p in COMPONENT.rglob("*"):
        if p.suffix in (".c", ".cpp", ".h", ".txt", ".cmake"):
            text = p.read_text()
            for needle in ("espnn/bundle.h", "espnn/bundle_runner.h", "espnn/pte_suite.h", "espnn/pte_runner.h",
                           "RunBundle(", "RunSuite(", "espnn_test_runner/"):
                assert needle not in text, (p, needle)


def test_packed_manifest_metadata(packed):
    _, manifest = packed
    for field in ("version: 0.1.0", "description:", "url:", "repository:", "license: Apache-2.0",
                  "path: components/espnn_runtime", "espressif/esp-nn:", "require: public",
                  "version: '>=1.2.3,<2.0.0'"):
        assert field in manifest, (field, manifest)
    # linux is claimed because tests/idf builds and runs the component there
    # (docs/firmware.md); the registry shows it as a supported target.
    assert "- linux" in manifest
