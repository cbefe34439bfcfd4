#!/usr/bin/env python3
"""Release consistency check of the component (run by
.github/workflows/upload-component.yml and .github/workflows/release.yml
before uploading, and by tests/firmware/test_release.py on every CI run):

- the tag is v<version> of pyproject.toml ([project] version, the one
  definition of the package's version) and components/espnn_runtime/
  idf_component.yml carries the same version;
- CHANGELOG.md has a "## [<version>]" section;
- the manifest's `repository` is the repository the workflow runs in, and
  url/documentation/issues/changelog point into it (a fork or a moved
  repository must not publish links to somewhere else);
- the manifest has no TODO left.

Standard library only (the workflow runs it before installing anything).
Exit status 0 when consistent, 1 with one line per problem otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

MANIFEST = "components/espnn_runtime/idf_component.yml"
PYPROJECT = "pyproject.toml"
LINK_FIELDS = ("url", "documentation", "issues", "changelog")


def top_level_scalars(text: str) -> dict[str, str]:
    """`key: value` lines at column 0 (the manifest's scalar fields)."""
    out = {}
    for m in re.finditer(r'^([A-Za-z_]+):[ \t]*"?([^"\n#]*?)"?[ \t]*(?:#.*)?$', text, re.M):
        if m.group(2):
            out[m.group(1)] = m.group(2)
    return out


def project_version(text: str) -> str:
    """`version = "..."` of pyproject.toml's [project] table ("" if none)."""
    table = re.search(r"^\[project\][ \t]*\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    m = table and re.search(r'^version[ \t]*=[ \t]*"([^"]*)"', table.group(1), re.M)
    return m.group(1) if m else ""


def problems(root: Path, tag: str, repository: str) -> list[str]:
    text = (root / MANIFEST).read_text()
    fields = top_level_scalars(text)
    version = fields.get("version", "")
    found = []
    pyproject = root / PYPROJECT
    package_version = project_version(pyproject.read_text()) if pyproject.is_file() else ""
    if not package_version:
        found.append(f"{PYPROJECT} has no [project] version")
    elif package_version != version:
        found.append(f"{PYPROJECT} version {package_version!r} is not {version!r}, the version in {MANIFEST}")
    if package_version and tag != f"v{package_version}":
        found.append(f"tag {tag!r} is not v{package_version} (the version in {PYPROJECT})")
    if tag != f"v{version}" and version != package_version:  # (once is enough when they agree)
        found.append(f"tag {tag!r} is not v{version} (the version in {MANIFEST})")
    changelog = (root / "CHANGELOG.md").read_text() if (root / "CHANGELOG.md").is_file() else ""
    if not re.search(rf"^## \[{re.escape(version)}\]", changelog, re.M):
        found.append(f"CHANGELOG.md has no '## [{version}]' section")
    want = repository.rstrip("/").removesuffix(".git").lower()
    have = fields.get("repository", "").rstrip("/").removesuffix(".git").lower()
    if have != want:
        found.append(f"{MANIFEST}: repository {fields.get('repository')!r} is not {repository!r}, "
                     "the repository this release is built from")
    for key in LINK_FIELDS:
        link = fields.get(key, "")
        if not link.lower().startswith(want):
            found.append(f"{MANIFEST}: {key} {link!r} does not point into {repository}")
    if "changelog" in fields and not fields["changelog"].endswith("/CHANGELOG.md"):
        found.append(f"{MANIFEST}: changelog should link CHANGELOG.md")
    if re.search(r"\bTODO\b", text):
        found.append(f"{MANIFEST} still has a TODO")
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", required=True, help="the pushed tag, e.g. v0.1.0")
    ap.add_argument("--repository", required=True, help="https://github.com/<owner>/<name> of this run")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    args = ap.parse_args(argv)
    found = problems(args.root, args.tag, args.repository)
    for p in found:
        print(f"release check: {p}", file=sys.stderr)
    if not found:
        print(f"release check: {args.tag} consistent")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
