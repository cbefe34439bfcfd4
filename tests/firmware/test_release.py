"""The release workflow's consistency check (.github/scripts/check_release.py):
tag = v<manifest version>, a CHANGELOG section for it, manifest links into
the repository the release is built from. The workflow itself
(.github/workflows/upload-component.yml) cannot run here (no GitHub Actions,
no registry)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from .conftest import REPO

SCRIPT = REPO / ".github/scripts/check_release.py"
HOME = "https://github.com/executorch-espnn/executorch-espnn"


def check(tag: str, repository: str = HOME, root=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--tag", tag, "--repository", repository,
                           "--root", str(root)], capture_output=True, text=True)


def manifest_version() -> str:
    return re.search(r'^version: "([^"]+)"', (REPO / "components/espnn_runtime/idf_component.yml").read_text(),
                     re.M).group(1)


def test_current_manifest_is_releasable():
    r = check(f"v{manifest_version()}")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("tag, repository, message", [
    ("v9.9.9", HOME, "is not v"),
    ("v{v}", "https://github.com/someone/fork", "is not 'https://github.com/someone/fork'"),
])
def test_inconsistent_releases_are_refused(tag, repository, message):
    r = check(tag.format(v=manifest_version()), repository)
    assert r.returncode == 1 and message in r.stderr, r.stderr


def test_missing_changelog_section_or_todo_is_refused(tmp_path):
    (tmp_path / "components/espnn_runtime").mkdir(parents=True)
    manifest = (REPO / "components/espnn_runtime/idf_component.yml").read_text()
    (tmp_path / "components/espnn_runtime/idf_component.yml").write_text(manifest + "# TODO later\n")
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n\n## [0.0.1]\n")
    r = check(f"v{manifest_version()}", root=tmp_path)
    assert r.returncode == 1
    assert "no '## [" in r.stderr and "still has a TODO" in r.stderr


def releasable_copy(tmp_path, pyproject_version: str | None):
    """A root with the real manifest and CHANGELOG and a pyproject.toml whose
    [project] version is `pyproject_version` (None: no version line)."""
    (tmp_path / "components/espnn_runtime").mkdir(parents=True)
    for f in ("components/espnn_runtime/idf_component.yml", "CHANGELOG.md"):
        (tmp_path / f).write_text((REPO / f).read_text())
    text = (REPO / "pyproject.toml").read_text()
    line = "" if pyproject_version is None else f'version = "{pyproject_version}"\n'
    text, n = re.subn(r'(?m)^version = "[^"]*"\n', line, text, count=1)
    assert n == 1
    (tmp_path / "pyproject.toml").write_text(text)
    return tmp_path


def test_package_version_is_the_release_version():
    """The tag must also be v<pyproject.toml's [project] version>, the one
    definition of the Python package's version."""
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(rf'^\[project\]\n(?:.*\n)*?version = "{re.escape(manifest_version())}"', text, re.M)


def test_package_and_component_versions_must_agree(tmp_path):
    root = releasable_copy(tmp_path, "9.9.9")
    r = check(f"v{manifest_version()}", root=root)
    assert r.returncode == 1
    assert f"pyproject.toml version '9.9.9' is not '{manifest_version()}'" in r.stderr, r.stderr
    r = check("v9.9.9", root=root)
    assert r.returncode == 1 and "(the version in components/espnn_runtime/idf_component.yml)" in r.stderr


def test_a_pyproject_without_version_is_refused(tmp_path):
    r = check(f"v{manifest_version()}", root=releasable_copy(tmp_path, None))
    assert r.returncode == 1 and "pyproject.toml has no [project] version" in r.stderr, r.stderr


def test_consistent_copy_is_releasable(tmp_path):
    r = check(f"v{manifest_version()}", root=releasable_copy(tmp_path, manifest_version()))
    assert r.returncode == 0, r.stderr


def test_workflow_uploads_the_component_on_version_tags():
    wf = (REPO / ".github/workflows/upload-component.yml").read_text()
    assert re.search(r'tags: \["v\*"\]', wf)
    assert "espressif/upload-components-ci-action@v2" in wf
    assert '"espnn_runtime:components/espnn_runtime"' in wf
    assert "vars.IDF_COMPONENT_NAMESPACE" in wf and "check_release.py" in wf
    if shutil.which("python3"):
        yaml = pytest.importorskip("yaml")
        doc = yaml.safe_load(wf)
        assert doc["jobs"]["upload"]["needs"] == "check"


def test_pypi_workflow_builds_and_smoke_tests_every_wheel_before_publishing():
    """.github/workflows/release.yml (never run here: no GitHub Actions, no
    PyPI): on v* tags the release check, then cibuildwheel on the three
    platforms (which smoke-tests each wheel, pyproject.toml) and the Linux
    audit, the sdist built and smoke-tested, and only then trusted
    publishing, on tags only."""
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((REPO / ".github/workflows/release.yml").read_text())
    on = doc[True] if True in doc else doc["on"]  # YAML 1.1 reads the key `on` as true
    assert on["push"]["tags"] == ["v*"]
    jobs = doc["jobs"]
    assert "check_release.py" in " ".join(s.get("run", "") for s in jobs["check"]["steps"])
    assert {e["os"] for e in jobs["wheels"]["strategy"]["matrix"]["include"]} == {
        "ubuntu-24.04", "ubuntu-24.04-arm", "macos-14"}
    wheel_steps = " ".join(s.get("run", "") for s in jobs["wheels"]["steps"])
    assert "cibuildwheel==4.3.5" in wheel_steps and "python -m cibuildwheel" in wheel_steps
    assert "check_wheel_audit.py" in wheel_steps
    sdist_steps = " ".join(s.get("run", "") for s in jobs["sdist"]["steps"])
    assert "build --sdist" in sdist_steps and "scripts/wheel-smoke.sh" in sdist_steps
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"check", "wheels", "sdist"}
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert publish["permissions"]["id-token"] == "write" and publish["environment"]["name"] == "pypi"
    assert [s["uses"] for s in publish["steps"] if "uses" in s][-1] == "pypa/gh-action-pypi-publish@release/v1"
    assert not any("password" in (s.get("with") or {}) for s in publish["steps"])  # no token: OIDC
