"""The image's lock files (hack/lock) still match pyproject.toml, and every file they pin has a hash.

requirements.lock: each runtime dependency of pyproject.toml is pinned at a version its specifier
allows, the entries uv marks as wanted by tasq itself are exactly those dependencies (a dependency
dropped from pyproject.toml leaves a stale entry this catches), and every other entry is wanted by
another entry. requirements-build.lock: the same for [build-system] requires. Offline: it reads the
files, it does not resolve again.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
TASQ = "tasq (pyproject.toml)"
# The image's interpreter: markers in pyproject are evaluated for it, not for the test's Python.
IMAGE_ENVIRONMENT: dict[str, str] = {**{k: str(v) for k, v in default_environment().items()}, "python_version": "3.11", "python_full_version": "3.11.16",
                     "sys_platform": "linux", "platform_system": "Linux"}


@dataclass
class Pin:
    version: Version
    hashes: list[str] = field(default_factory=list)
    wanted_by: set[str] = field(default_factory=set)


def read_lock(path: Path) -> dict[str, Pin]:
    """The lock's entries by canonical name: version, hashes and the `# via` names uv wrote."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    in_via = False
    for line in path.read_text().splitlines():
        if entry := re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line):
            current = pins[canonicalize_name(entry[1])] = Pin(Version(entry[2]))
            in_via = False
        elif current is None or not line.strip():
            continue
        elif digest := re.search(r"--hash=sha256:([0-9a-f]{64})", line):
            current.hashes.append(digest[1])
        elif via := re.match(r"^\s+# via(?: (.+))?$", line):
            in_via = via[1] is None
            if via[1] is not None:
                current.wanted_by.add(via[1].strip())
        elif in_via and (name := re.match(r"^\s+#\s+(.+)$", line)):
            current.wanted_by.add(name[1].strip())
    return pins


def wanted(requirements: list[str]) -> dict[str, Requirement]:
    parsed = [Requirement(r) for r in requirements]
    return {canonicalize_name(r.name): r for r in parsed if r.marker is None or r.marker.evaluate(IMAGE_ENVIRONMENT)}


LOCKS = {
    "requirements.lock": PYPROJECT["project"]["dependencies"],
    "requirements-build.lock": PYPROJECT["build-system"]["requires"],
}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_requirement_of_pyproject_is_pinned_at_a_version_it_allows(lock: str) -> None:
    pins = read_lock(REPO / lock)
    for name, requirement in wanted(LOCKS[lock]).items():
        assert name in pins, f"{lock} lacks {requirement}: run hack/lock"
        assert requirement.specifier.contains(pins[name].version, prereleases=True), (
            f"{lock} pins {name}=={pins[name].version}, pyproject.toml wants {requirement}: run hack/lock")


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_pin_carries_hashes(lock: str) -> None:
    pins = read_lock(REPO / lock)
    assert pins
    assert not [name for name, pin in pins.items() if not pin.hashes]


def test_the_runtime_lock_holds_what_pyproject_wants_and_what_that_needs_nothing_else() -> None:
    pins = read_lock(REPO / "requirements.lock")
    direct = {name for name, pin in pins.items() if TASQ in pin.wanted_by}
    assert direct == set(wanted(LOCKS["requirements.lock"])), "run hack/lock"
    orphans = {name for name, pin in pins.items()
               if not any(canonicalize_name(w) in pins or w == TASQ for w in pin.wanted_by)}
    assert not orphans


def test_the_build_lock_holds_the_build_requirements_and_what_they_need() -> None:
    pins = read_lock(REPO / "requirements-build.lock")
    direct = set(wanted(LOCKS["requirements-build.lock"]))
    # uv names no `via` for requirements read from standard input: those are the direct ones
    assert {name for name, pin in pins.items() if not pin.wanted_by} == direct
    assert all(canonicalize_name(w) in pins for pin in pins.values() for w in pin.wanted_by)


def test_a_stale_lock_is_caught(tmp_path: Path) -> None:
    # the checks above on a lock that still pins a dependency pyproject.toml no longer has
    lock = tmp_path / "requirements.lock"
    lock.write_text("leftover==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n    # via tasq (pyproject.toml)\n")
    pins = read_lock(lock)
    assert pins["leftover"].wanted_by == {TASQ} and pins["leftover"].hashes == ["0" * 64]
    assert {n for n, p in pins.items() if TASQ in p.wanted_by} != set(wanted(LOCKS["requirements.lock"]))


def test_the_dockerfile_installs_only_hashed_pins_on_a_base_pinned_by_digest() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.M)
    assert base is not None and re.fullmatch(r"python:3\.11[\w.-]*-slim[\w.-]*@sha256:[0-9a-f]{64}", base[1])
    assert re.findall(r"^FROM (\S+)", dockerfile, re.M) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    installs = re.findall(r"pip install ([^&\n]+)", dockerfile)
    for lock in LOCKS:
        assert any(f"--require-hashes --no-deps -r /tmp/{lock}" in i for i in installs), lock
    wheel_install = next(i for i in installs if "/tmp/dist/" in i)
    assert "--no-deps" in wheel_install  # its dependencies came from the lock, by hash
