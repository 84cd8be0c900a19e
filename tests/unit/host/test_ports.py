"""Free ports for servers: outside the kernel's ephemeral range, never handed to two processes."""

from __future__ import annotations

import multiprocessing
import socket
from pathlib import Path

from eos_etl.host import ports
from eos_etl.host.ports import candidate_ports, ephemeral_range, free_port, port_is_free


def test_a_free_port_is_outside_the_ephemeral_range_and_free_on_every_address():
    low, high = ephemeral_range()
    for _ in range(50):
        port = free_port()
        assert not low <= port <= high
        assert ports.BAND[0] <= port <= ports.BAND[1]
        assert port_is_free(port) and port_is_free(port, "0.0.0.0")


def test_the_band_leaves_out_whatever_part_the_ephemeral_range_covers(tmp_path: Path):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("25000\t60999\n")
    assert ephemeral_range(range_file) == (25000, 60999)
    assert candidate_ports((20000, 29999), (25000, 60999)) == list(range(20000, 25000))
    assert candidate_ports((20000, 29999), (1024, 65535)) == []
    assert ephemeral_range(tmp_path / "missing") is None


def test_a_port_something_listens_on_is_skipped():
    free_port()  # sets the cursor
    nxt = candidate_ports(ephemeral=ephemeral_range())[ports._cursor]
    with socket.socket() as listener:  # takes the port the cursor would hand out next
        listener.bind(("127.0.0.1", nxt))
        listener.listen()
        assert free_port() != nxt


def _take(n: int, out, ready, done) -> None:
    out.put([free_port() for _ in range(n)])
    ready.wait()
    done.wait()  # hold the reservations while the others pick theirs


def test_processes_that_start_from_the_same_cursor_never_get_the_same_port():
    """Forked children inherit the parent's cursor: only the reservations keep them apart."""
    held = free_port()  # the parent's cursor is set before the fork
    ctx = multiprocessing.get_context("fork")
    n, per = 6, 40
    out, ready, done = ctx.Queue(), ctx.Barrier(n + 1), ctx.Event()
    children = [ctx.Process(target=_take, args=(per, out, ready, done)) for _ in range(n)]
    for c in children:
        c.start()
    try:
        ready.wait(timeout=60)
        taken = [out.get(timeout=60) for _ in range(n)]
    finally:
        done.set()
        for c in children:
            c.join(timeout=60)
    every = [p for t in taken for p in t]
    assert len(set(every)) == n * per
    assert held not in every


def test_a_reservation_ends_with_its_process():
    ctx = multiprocessing.get_context("spawn")
    out, ready, done = ctx.Queue(), ctx.Barrier(1), ctx.Event()
    done.set()
    child = ctx.Process(target=_take, args=(1, out, ready, done))
    child.start()
    (port,) = out.get(timeout=60)
    child.join(timeout=60)
    assert ports._reserve(port)  # the child's lock went with it
