"""Our Docker engine from a shell: ``python3 -m orchestrator.localplane.dockerd``.

Command line (no console entry point of its own; .ci/run, tools/e2e-kind.sh and docs/kind.md
use it)::

    python3 -m orchestrator.localplane.dockerd up|down|status|env [--state-dir DIR] [--ttl N]

``up`` and ``env`` print ``export DOCKER_HOST=...`` for ``eval``; progress goes to stderr. The
engine itself is dockerengine.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.processes import PlaneError, tail


def main(argv: list[str] | None = None) -> int:
    """``python3 -m orchestrator.localplane.dockerd up|down|status|env``."""
    parser = argparse.ArgumentParser(prog="python3 -m orchestrator.localplane.dockerd")
    parser.add_argument("command", choices=["up", "down", "status", "env"])
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument(
        "--keep-containers", action="store_true", help="down: leave containers in the data dir"
    )
    parser.add_argument("--purge", action="store_true", help="down: delete the state dir")
    parser.add_argument(
        "--ttl", type=int, default=None, help="up: stop by itself (containers removed) after N s"
    )
    args = parser.parse_args(argv)
    engine = DockerEngine(args.state_dir)

    def say(msg: str) -> None:
        print(f"[dockerd] {msg}", file=sys.stderr)

    try:
        if args.command == "up":
            st = engine.up(ttl_seconds=args.ttl, progress=say)
            print(f"export DOCKER_HOST={st.docker_host}")
        elif args.command == "down":
            engine.down(remove_containers=not args.keep_containers, purge=args.purge, progress=say)
        elif args.command == "env":
            print(f"export DOCKER_HOST={engine.status().docker_host}")
        else:
            st = engine.status()
            print(
                json.dumps(
                    {
                        "stateDir": str(st.state_dir),
                        "dockerHost": st.docker_host,
                        "pid": st.pid,
                        "running": st.running,
                        "healthy": st.healthy,
                        "version": st.version,
                        "log": str(engine.log),
                    }
                )
            )
            return 0 if st.healthy else 1
    except PlaneError as exc:
        say(f"error: {exc}")
        if args.command == "up":
            say(f"last log lines:\n{tail(engine.log)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
