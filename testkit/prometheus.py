"""Scrape a Prometheus endpoint and read its text exposition (what Prometheus itself would see)."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def free_address() -> str:
    """A loopback address with a port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@dataclass(frozen=True)
class Sample:
    """One line of the exposition: a series and its value."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Histogram:
    """A histogram series summed over every label set that matched: count, sum, buckets."""

    count: float = 0
    sum: float = 0
    buckets: dict[float, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Scrape:
    """Every sample of one scrape."""

    samples: tuple[Sample, ...]

    def named(self, name: str, **labels: str) -> list[Sample]:
        """Samples of ``name`` whose labels include ``labels``."""
        return [
            s
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the matching samples (0 when there are none)."""
        return sum(s.value for s in self.named(name, **labels))

    def histogram(self, name: str, **labels: str) -> Histogram:
        """``name``'s _count, _sum and cumulative _bucket values over the matching series."""
        buckets: dict[float, float] = {}
        for s in self.named(f"{name}_bucket", **labels):
            le = float(s.labels["le"])
            buckets[le] = buckets.get(le, 0) + s.value
        return Histogram(
            self.value(f"{name}_count", **labels), self.value(f"{name}_sum", **labels), buckets
        )


def parse(text: str) -> Scrape:
    """The samples of a text exposition (comments and blank lines skipped)."""
    samples: list[Sample] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = _SAMPLE.match(line.strip())
        assert match, f"not a sample line: {line!r}"
        labels = {
            k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
            for k, v in _LABEL.findall(match["labels"] or "")
        }
        samples.append(Sample(match["name"], labels, float(match["value"])))
    return Scrape(tuple(samples))


def scrape(address: str, timeout: float = 10.0) -> Scrape:
    """GET http://address/metrics and parse it."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as response:
        assert response.status == 200
        content_type = response.headers.get("Content-Type", "")
        assert content_type.startswith("text/plain"), content_type
        return parse(response.read().decode())


def scrape_until(
    address: str, what: str, check: Callable[[Scrape], bool], timeout: float = 60.0
) -> Scrape:
    """Scrape until ``check`` holds (bounded).

    For the SDK's own metrics, which its core records after it reports a completion to the
    server, so they can trail what a client already saw.
    """
    deadline = time.monotonic() + timeout
    while True:
        current = scrape(address)
        if check(current):
            return current
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)
