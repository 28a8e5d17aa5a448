"""Render the first items of a stream in forked children while the parent makes the rest.

Why: ``calibrator place -o json`` at 1k x 10k spends about two thirds of its run placing
workloads, one after another, and a third turning the decisions into text (each summary counts
the clusters every reason rejected), on one core of two. A decision's text depends only on what
the workloads before it consumed (``placement.decide``), so once a chunk of decisions is made, a
child process can render it while the parent places the next chunk: ``fork`` gives the child the
parent's memory as it is at that moment (copy-on-write, nothing serialised), and the child writes
its text to an anonymous memory file (``memfd``) that the parent reads back, in order.

One way of writing: each chunk's text is ``render(chunk, start)``, whichever process runs it, so
the output is the same as rendering everything in the parent (the tests hold the two to the same
bytes). A child that fails or outlives its bound is killed and its chunk rendered again by the
parent, which then raises the real error if there is one.

Only where it can pay: Linux (``fork``, ``memfd_create``, ``pidfd_open``), at least two CPUs for
this process, a single thread (a fork copies no other thread, and a lock one of them held would
stay locked in the child), a stream of at least ``min_chunk`` items, and a machine that left at
least ``IDLE_CPUS`` idle while the first chunk was made (``/proc/stat``, read when the stream
starts and when its first chunk is ready): on a busy machine a child only competes with the
parent and adds its page copies. Measured over the run itself, not by the load average, which
counts the minute before it (the previous run of the same command among it). At most one child
renders at a time: while it runs, the parent's chunk grows.
"""

from __future__ import annotations

import codecs
import os
import select
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

# Chunks per stream of known length, about: each child pays for its fork, the pages it and the
# parent copy after it, and the caches the renderer builds again (~0.1 s of CPU for summaries
# at 1k x 10k), so few large chunks beat many small ones (docs/benchmarks.md).
CHUNKS = 3
# Items per chunk at least (a shorter stream is rendered by the parent alone).
MIN_CHUNK = 1024
# A child's bound: generous (a decision renders in well under 50 ms even with ``--explain`` at
# 1,000 clusters), only so that a child that never ends cannot hold the command forever.
SECONDS_PER_ITEM = 1.0
SECONDS_BASE = 60.0
# The parent reads a child's text back this many bytes at a time.
READ_BYTES = 1 << 20
# CPUs left idle on average while the first chunk was made, at least, for children to start.
IDLE_CPUS = 0.5

Render = Callable[[Sequence[T], int], str]


def available() -> bool:
    """True when this process can fork renderers (the machine's idle CPUs are asked later)."""
    if not all(hasattr(os, name) for name in ("fork", "memfd_create", "pidfd_open")):
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except OSError:
        return False
    return cpus >= 2 and threading.active_count() == 1


def cpu_ticks() -> tuple[int, int] | None:
    """(idle, total) clock ticks of all CPUs since boot (``/proc/stat``), None if unreadable."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    try:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, fields[1:9])
    except ValueError:
        return None
    return idle + iowait, user + nice + system + idle + iowait + irq + softirq + steal


def idle_cpus(since: tuple[int, int] | None) -> float:
    """CPUs the machine left idle on average since ``since`` (0 when it cannot tell)."""
    now = cpu_ticks()
    if since is None or now is None or now[1] <= since[1]:
        return 0.0
    return (now[0] - since[0]) / (now[1] - since[1]) * (os.cpu_count() or 1)


def rendered(
    source: Iterable[T],
    render: Render[T],
    *,
    overlap: bool,
    batch: int,
    expected: int = 0,
) -> Iterator[str]:
    """``render(chunk, start)`` of consecutive chunks of ``source``, in order.

    ``start`` is the position of the chunk's first item. Without ``overlap`` the source is read
    in full first (rendering while it still makes items would make the renderer rebuild what it
    reads of the source's state, e.g. the explainer's ledger caches, every chunk), then rendered
    here ``batch`` items at a time. With it, a chunk of the items already made goes to a forked
    child whenever no child is rendering and the chunk holds at least ``expected / CHUNKS``
    items (``MIN_CHUNK`` at least) and, when ``expected`` is known, at least half a chunk is
    still to come, and the machine left ``IDLE_CPUS`` idle while the first chunk was made (else
    no child for this stream); once the source ends, one more child takes the first half of
    what is left when that is large, and the parent renders the rest while they finish.
    """
    if not overlap:
        yield from _batches(render, list(source), 0, batch)
        return
    min_chunk = max(MIN_CHUNK, expected // CHUNKS)
    children: list[_Child[T]] = []
    began = cpu_ticks()
    idle: bool | None = None  # whether the machine had a CPU to spare (asked once, see above)

    def spare() -> bool:
        nonlocal idle
        if idle is None:
            idle = idle_cpus(began) >= IDLE_CPUS
        return idle

    try:
        chunk: list[T] = []
        start = 0
        # Near the end of a stream of known length, a chunk waits to be split with the parent
        # (below): handed over whole, the parent would have nothing to do but wait for it.
        last = expected - min_chunk // 2 if expected else None
        for item in source:
            chunk.append(item)
            if (
                len(chunk) >= min_chunk
                and (last is None or start + len(chunk) <= last)
                and (not children or children[-1].exited())
                and spare()
            ):
                start, chunk = _hand_over(render, chunk, start, children, batch)
        if len(chunk) >= 2 * MIN_CHUNK and spare():
            start, chunk = _hand_over(render, chunk, start, children, batch, len(chunk) // 2)
        # Rendered now, while the last child works, so held until the children's text is out:
        # at most the last chunk's share (a sixth of the stream, less for a short one).
        tail = list(_batches(render, chunk, start, batch))
        for child in children:
            yield from child.text(render, batch)
        yield from tail
    finally:
        for child in children:
            child.close()


def _hand_over(
    render: Render[T],
    chunk: list[T],
    start: int,
    children: list[_Child[T]],
    batch: int,
    size: int | None = None,
) -> tuple[int, list[T]]:
    """Give the first ``size`` items of ``chunk`` (all by default) to a new child.

    Returns the new start and what is left for the parent (all of it if no child started).
    """
    given = chunk if size is None else chunk[:size]
    child = _Child.spawn(render, given, start, batch)
    if child is None:
        return start, chunk
    children.append(child)
    return start + len(given), chunk[len(given) :]


def _batches(render: Render[T], items: list[T], start: int, batch: int) -> Iterator[str]:
    """``render`` of ``items`` (the stream's from ``start``) ``batch`` at a time."""
    for offset in range(0, len(items), batch):
        yield render(items[offset : offset + batch], start + offset)


class _Child(Generic[T]):
    """One forked renderer: its pid, a pidfd to wait on, and the memfd it writes its text to."""

    def __init__(self, pid: int, pidfd: int, memfd: int, items: list[T], start: int) -> None:
        self.pid, self.pidfd, self.memfd = pid, pidfd, memfd
        self.items, self.start = items, start
        self.status: int | None = None

    @classmethod
    def spawn(cls, render: Render[T], items: list[T], start: int, batch: int) -> _Child[T] | None:
        """Fork a child that renders ``items`` (None: it could not be started; render here).

        The child writes ``batch`` items' text at a time, so neither process holds a chunk's
        text as one string: only the memfd does.
        """
        try:
            memfd = os.memfd_create("calibrator-chunk", os.MFD_CLOEXEC)
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            os.close(memfd)
            return None
        if pid == 0:  # the child: render, write, and leave without running the parent's code
            code = 70
            try:
                for text in _batches(render, items, start, batch):
                    view = memoryview(text.encode())
                    while view:
                        view = view[os.write(memfd, view) :]
                code = 0
            finally:
                os._exit(code)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(memfd)
            return None
        return cls(pid, pidfd, memfd, items, start)

    def exited(self) -> bool:
        """Whether the child has ended (reaped here, its status kept)."""
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is not None

    def text(self, render: Render[T], batch: int) -> Iterator[str]:
        """The chunk's text in pieces: the child's, once it ended well, else rendered here."""
        if self.status is None:
            bound = SECONDS_BASE + SECONDS_PER_ITEM * len(self.items)
            ready, _, _ = select.select([self.pidfd], [], [], bound)
            if not ready:
                os.kill(self.pid, signal.SIGKILL)
            self.status = os.waitpid(self.pid, 0)[1]
        if self.status != 0:
            yield from _batches(render, self.items, self.start, batch)
            return
        decoder = codecs.getincrementaldecoder("utf-8")()
        offset = 0
        while part := os.pread(self.memfd, READ_BYTES, offset):
            offset += len(part)
            yield decoder.decode(part)
        yield decoder.decode(b"", final=True)

    def close(self) -> None:
        """Kill the child if it still runs (the parent failed or stopped reading), free its fds."""
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            self.status = os.waitpid(self.pid, 0)[1]
        os.close(self.pidfd)
        os.close(self.memfd)
        self.items = []
