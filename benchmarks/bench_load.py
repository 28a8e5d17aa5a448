"""Time reading a snapshot file: parse (YAML or JSON) plus validation; prints a markdown table.

Usage: ``python -m benchmarks.bench_load [--clusters 1000] [--workloads 10000] [--repeats 3]
[--baseline]``. The fleet comes from ``testkit.fleetgen`` and is written once as block-style
YAML and as compact JSON (generation not timed). ``--baseline`` also times the loaders the
project used before ``orchestrator.domain.documents``: ``yaml.safe_load`` (pure Python) and
``yaml.load(..., CSafeLoader)``, each followed by the same validation.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import yaml

from orchestrator.domain.documents import load_document
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from testkit.fleetgen import generate_fleet_mapping


def _validated(load: Callable[[bytes], Any], text: bytes) -> object:
    return snapshot_from_mapping(load(text))


def _median(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()
    doc = generate_fleet_mapping(args.clusters, args.workloads)
    texts = {
        "YAML": yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False).encode(),
        "JSON": json.dumps(doc, separators=(",", ":")).encode(),
    }
    loaders: dict[str, Callable[[bytes], Any]] = {"documents.load_document": load_document}
    if args.baseline:
        loaders["yaml.safe_load"] = yaml.safe_load
        loaders["yaml.load CSafeLoader"] = lambda b: yaml.load(b, Loader=yaml.CSafeLoader)
    print(f"{args.clusters} clusters x {args.workloads} workloads, median of {args.repeats}")
    print("| format | size | loader | parse s | parse + validate s |")
    print("|---|---|---|---|---|")
    for fmt, text in texts.items():
        for name, load in loaders.items():
            parse = _median(functools.partial(load, text), args.repeats)
            full = _median(functools.partial(_validated, load, text), args.repeats)
            print(f"| {fmt} | {len(text) / 1e6:.1f} MB | {name} | {parse:.2f} | {full:.2f} |")


if __name__ == "__main__":
    main()
