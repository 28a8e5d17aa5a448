"""Fleet Calibrator: converge Kubernetes version drift across a Cluster API fleet.

``__version__`` is the installed distribution's version, so pyproject.toml stays its one
source; it is read on first use (PEP 562), not at import: every command imports this package,
and reading the distribution's metadata costs a scan of sys.path that only ``--version`` needs.
"""

from __future__ import annotations

DISTRIBUTION = "fleet-calibrator"


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - on use only

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # a source tree run without being installed
        return "0+unknown"
