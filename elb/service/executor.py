"""Runs node operations (launch and provision, the drain sequence, repairs) off the polling loop.

The executor decides nothing: a pass hands it an operation on some nodes, and it runs it on a
bounded thread pool, one operation per node at a time. Passes go on meanwhile, and ask it which
nodes have an operation in flight (those are not touched) and what the operations that ended
since the last pass achieved. Operations report through the journal, step by step, as they do
when run inline; a crash leaves the journal's last step for the next start to repair.

``inline=True`` runs each operation at once, in the caller's thread (``elb once``: the pass ends
when its operations end).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from elb.service.actuator import Outcomes

log = logging.getLogger("elb.service.executor")

DEFAULT_WORKERS = 8

Operation = Callable[[Outcomes], None]


class Executor:
    def __init__(self, *, workers: int = DEFAULT_WORKERS, inline: bool = False) -> None:
        self.inline = inline
        self._pool = None if inline else ThreadPoolExecutor(max_workers=workers, thread_name_prefix="elb-op")
        self._lock = threading.Lock()
        self._in_flight: dict[str, threading.Event] = {}  # node -> its operation's "ended"
        self._done: list[Outcomes] = []

    def in_flight(self) -> frozenset[str]:
        """Nodes with an operation under way."""
        with self._lock:
            return frozenset(self._in_flight)

    def submit(self, nodes: Iterable[str], what: str, op: Operation) -> bool:
        """Start ``op`` on ``nodes``; False (nothing started) if one of them has an operation
        under way. ``what`` names it in the log if it raises."""
        names = tuple(nodes)
        out = Outcomes()
        ended = threading.Event()

        def run() -> None:
            try:
                op(out)
            except Exception as err:  # the operation failed, not elb: the journal has its last step
                log.exception("%s: operation failed", what)
                out.failed[what] = f"{type(err).__name__}: {err}"
            finally:
                with self._lock:
                    self._done.append(out)
                    for n in names:
                        if self._in_flight.get(n) is ended:
                            del self._in_flight[n]
                ended.set()

        with self._lock:
            if any(n in self._in_flight for n in names):
                return False
            for n in names:
                self._in_flight[n] = ended
        if self._pool is None:
            run()
        else:
            self._pool.submit(run)
        return True

    def collect(self) -> Outcomes:
        """What the operations that ended since the last call achieved, merged."""
        with self._lock:
            done, self._done = self._done, []
        merged = Outcomes()
        for o in done:
            merged.absorb(o)
        return merged

    def wait(self) -> None:
        """Wait until every operation under way has ended."""
        with self._lock:
            ended = list(self._in_flight.values())
        for e in ended:
            e.wait()

    def wait_for(self, node: str) -> None:
        """Wait until the operation under way on ``node`` (if any) has ended."""
        with self._lock:
            ended = self._in_flight.get(node)
        if ended is not None:
            ended.wait()

    def shutdown(self) -> None:
        """Wait for the operations under way; start none."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
