"""Reading the apiserver's deprecated-API metrics from its text exposition."""

from __future__ import annotations

import pytest

from orchestrator.domain.promtext import (
    DeprecatedUse,
    LineReader,
    Resource,
    parse_sample,
    read_deprecated_requests,
)

VAC = Resource("storage.k8s.io", "v1beta1", "volumeattributesclasses")


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("up 1", ("up", {}, 1.0)),
        ("up 1 1700000000000", ("up", {}, 1.0)),
        ('m{a="x"} 2', ("m", {"a": "x"}, 2.0)),
        ('m{a="x",} 2', ("m", {"a": "x"}, 2.0)),
        ('m{a="x", b = "y"} 1.5e+06', ("m", {"a": "x", "b": "y"}, 1.5e6)),
        ('m{a="1,2}"} 3', ("m", {"a": "1,2}"}, 3.0)),
        # The text format's three escapes.
        (
            r'm{a="q\"uote",b="back\\slash",c="new\nline"} 4',
            ("m", {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}, 4.0),
        ),
        ("m{} 5", ("m", {}, 5.0)),
        ('m{a="x"}', None),
        ('m{a="x} 1', None),
        ("m{a=x} 1", None),
        ('m{a="x"} one', None),
        ('m{a="x"} 1 2 3', None),
        ("", None),
    ],
)
def test_parse_sample(line: str, parsed: object) -> None:
    assert parse_sample(line) == parsed


def test_nan_parses_and_counts_as_nothing() -> None:
    sample = parse_sample("m NaN")
    assert sample is not None and sample[2] != sample[2]
    line = 'apiserver_request_total{group="g.io",version="v1",resource="as"} NaN'
    gauge_line = 'apiserver_requested_deprecated_apis{group="g.io",version="v1",resource="as"} 1'
    read = read_deprecated_requests([line, gauge_line])
    assert read.uses == (DeprecatedUse(Resource("g.io", "v1", "as"), "", 0),)


def request(group: str, version: str, resource: str, verb: str, code: str, n: str) -> str:
    return (
        f'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",'
        f'group="{group}",resource="{resource}",scope="cluster",subresource="",verb="{verb}",'
        f'version="{version}"}} {n}'
    )


def gauge(group: str, version: str, resource: str, release: str, value: str = "1") -> str:
    return (
        f'apiserver_requested_deprecated_apis{{group="{group}",removed_release="{release}",'
        f'resource="{resource}",subresource="",version="{version}"}} {value}'
    )


HEAD = [
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
    "# TYPE apiserver_request_total counter",
]


@pytest.mark.parametrize(
    ("lines", "uses", "malformed"),
    [
        # Nothing deprecated requested: counts alone say nothing.
        ([*HEAD, request("apps", "v1", "deployments", "LIST", "200", "12")], (), 0),
        # Summed over verbs and codes, the counter before the gauge (the exposition's order).
        (
            [
                *HEAD,
                request("storage.k8s.io", "v1beta1", "volumeattributesclasses", "GET", "200", "3"),
                request("storage.k8s.io", "v1beta1", "volumeattributesclasses", "LIST", "200", "4"),
                request("storage.k8s.io", "v1", "volumeattributesclasses", "LIST", "200", "100"),
                request("storage.k8s.io", "v1beta1", "volumeattributesclasses", "GET", "404", "1"),
                gauge("storage.k8s.io", "v1beta1", "volumeattributesclasses", "1.37"),
            ],
            (DeprecatedUse(VAC, "1.37", 8),),
            0,
        ),
        # The gauge before the counter works alike; a 0 gauge is not a use; large counters in
        # exponent form; the core group is "".
        (
            [
                gauge("", "v1", "componentstatuses", "", "1"),
                gauge("batch", "v1beta1", "cronjobs", "1.25", "0"),
                request("", "v1", "componentstatuses", "GET", "200", "1.204e+06"),
            ],
            (DeprecatedUse(Resource("", "v1", "componentstatuses"), "", 1_204_000),),
            0,
        ),
        # A gauge whose counter never appeared: 0 requests, not unknown.
        (
            [gauge("g.io", "v1beta1", "things", "1.40")],
            (DeprecatedUse(Resource("g.io", "v1beta1", "things"), "1.40", 0),),
            0,
        ),
        # Malformed lines of the two families are counted and skipped; others are not parsed.
        (
            [
                'apiserver_request_total{group="x" 1',
                "apiserver_requested_deprecated_apis{} one",
                'other_metric{a="unterminated} 1',
                gauge("storage.k8s.io", "v1beta1", "volumeattributesclasses", "1.37"),
            ],
            (DeprecatedUse(VAC, "1.37", 0),),
            2,
        ),
        # Families that share the prefix are never parsed, so never malformed.
        (
            [
                'apiserver_request_duration_seconds_bucket{le="0.1" 3',
                "apiserver_requested_deprecated_apis_other 1",
            ],
            (),
            0,
        ),
        # Non-resource requests (no resource label) are ignored.
        (['apiserver_request_total{code="200",path="/metrics",verb="GET"} 9'], (), 0),
    ],
)
def test_read_deprecated_requests(
    lines: list[str], uses: tuple[DeprecatedUse, ...], malformed: int
) -> None:
    read = read_deprecated_requests(lines)
    assert read.uses == uses
    assert read.malformed == malformed
    assert read.lines == len(lines)


def test_untracked_counters_are_unknown_not_zero() -> None:
    lines = [
        request("a.io", "v1", "as", "GET", "200", "1"),
        request("storage.k8s.io", "v1beta1", "volumeattributesclasses", "GET", "200", "5"),
        gauge("storage.k8s.io", "v1beta1", "volumeattributesclasses", "1.37"),
    ]
    read = read_deprecated_requests(lines, max_tracked=1)
    assert read.uses == (DeprecatedUse(VAC, "1.37", None),)


@pytest.mark.parametrize(
    ("chunks", "lines", "overlong"),
    [
        ([b"a\nb\n"], ["a", "b"], 0),
        ([b"a", b"b\nc"], ["ab", "c"], 0),
        ([b"", b"a\n", b"\n"], ["a", ""], 0),
        # An overlong line is dropped whole, split over chunks or not; the next survives.
        ([b"0123456789\nok\n"], ["ok"], 1),
        ([b"01234", b"56789", b"abc\nok"], ["ok"], 1),
        ([b"012345678", b"9xyz", b"\nok\n"], ["ok"], 1),
        ([b"12345678\n"], ["12345678"], 0),
        ([b"caf\xc3\xa9\n\xff\n"], ["café", "\ufffd"], 0),
    ],
)
def test_line_reader(chunks: list[bytes], lines: list[str], overlong: int) -> None:
    reader = LineReader(max_line=8)
    assert list(reader.lines(chunks)) == lines
    assert reader.overlong == overlong
    assert reader.bytes == sum(len(c) for c in chunks)


def test_line_reader_keeps_at_most_one_line_pending() -> None:
    """A stream of many MB passes through with nothing but the current line held."""
    reader = LineReader(max_line=1024)
    body = (b"x" * 100 + b"\n") * 50_000
    chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))
    assert sum(1 for _ in reader.lines(chunks)) == 50_000
    assert reader.bytes == len(body)
