"""A streamed body: inflated in bounded steps, counted on the wire, released however it ends."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kubernetes import client

from orchestrator.kube.bounded import CHUNK, BodyStream, Deadline


@dataclass
class Raw:
    """What BodyStream reads of urllib3's response: headers, raw chunks, release."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    released: bool = False

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        assert not decode_content
        for i in range(0, len(self.body), amt):
            yield self.body[i : i + amt]

    def release_conn(self) -> None:
        self.released = True


@dataclass
class Response:
    response: Raw
    status: int = 200
    reason: str = "OK"


@pytest.mark.parametrize("compressed", [False, True])
def test_a_body_is_read_in_bounded_chunks(compressed: bool) -> None:
    text = b"x" * (10 * CHUNK) + b"\nend\n"  # inflates about 1000:1
    body = gzip.compress(text) if compressed else text
    raw = Raw(body, {"Content-Encoding": "gzip"} if compressed else {})
    with BodyStream(Response(raw), Deadline(10)) as stream:
        chunks = list(stream)
    assert b"".join(chunks) == text
    assert max(len(c) for c in chunks) <= CHUNK
    assert stream.wire_bytes == len(body)
    assert raw.released


def test_an_error_status_is_raised_and_the_connection_released() -> None:
    raw = Raw(b"forbidden")
    with pytest.raises(client.ApiException) as err:
        BodyStream(Response(raw, 403, "Forbidden"), Deadline(10))
    assert err.value.status == 403 and raw.released
