"""A cycle's queries in flight together: a small pool of threads owned by a source, each thread
with its own client.

A cycle is a fixed, small number of queries (eight for FlowCon on Kubernetes, plus one per QoE
metric). Sent one after the other, policyd waits while Prometheus evaluates each, and
Prometheus idles while policyd decodes each answer. Sent together on up to `workers` threads,
Prometheus evaluates them in parallel and the decoding of one answer (in its thread) overlaps
the evaluation of the next. The caller still takes the answers in the order it always did
(`Batch.send` returns a function giving that query's answer or raising its error), so the first
failure in that order is the one raised, as before.

`workers == 1` is the sequential cycle as it always was: nothing is sent until its answer is
asked for, in the calling thread, so a cycle whose evaluation query fails sends nothing more.

Thread safety. requests' documentation makes no promise that a `Session` may be shared
between threads (psf/requests issue 2766 asks for that contract); urllib3 documents its
connection pools as thread-safe, but a session also holds a cookie jar, its mounted adapters
and its `auth` object, and policyd's own auth objects keep state unguarded (the bearer token
file's last contents and stamp, `policyd.clients.http_access`). So no session is shared: every
thread that runs a query, the pool's and any caller's (the daemon ticks several policies at
once), makes its own client with `connect` the first time, with the same retry policy,
timeout, TLS, authentication and headers; each re-reads a rotated token file itself. A client
passed in from outside (tests) is whatever `connect` returns, and must then be thread-safe.

Every query sent by a batch is done (or cancelled, if no thread had started it) before the
batch closes, even when it closes on an error: nothing of a cycle runs after the cycle has
returned, so a garbage-collector pause around the cycle (`policyd.fastjson.paused_gc`) covers
every answer's decoding.

A source whose cycle also reads something else (a Kubernetes API list, the Docker engines'
stats, the cAdvisors) reads it `alongside` the queries: in the calling thread, which would
otherwise only wait, while the pool's threads run the queries sent before it; with one worker,
when its answer is asked for, in the order it always was. Its answer too is taken in that
order, so an earlier query's failure is still the one raised.

Must not: build queries, decode or parse answers, or decide what a failure means (callers do).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, TypeVar

from policyd.tick import close_source

C = TypeVar("C")
T = TypeVar("T")

MAX_WORKERS = 16
"""The most threads a pool may have (`prometheus.max_concurrent_queries`' upper bound): a cycle
is a handful of queries."""


class QueryPool(Generic[C]):
    """Up to `workers` queries at once, each thread on its own client (module docstring)."""

    def __init__(self, connect: Callable[[], C], *, workers: int,
                 name: str = "policyd-query", owns_clients: bool = True) -> None:
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"workers must be 1 to {MAX_WORKERS}, not {workers}")
        self.workers = workers
        self._connect = connect
        self._name = name
        self._owns_clients = owns_clients
        """Whether `close` closes the clients `connect` made (False: they are someone else's,
        as a client passed in to every thread is)."""
        self._local = threading.local()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._made: list[C] = []

    def client(self) -> C:
        """This thread's client, made at its first query."""
        made: C | None = getattr(self._local, "client", None)
        if made is None:
            made = self._connect()
            self._local.client = made
            with self._lock:
                self._made.append(made)
        return made

    def run_here(self, call: Callable[[C], T]) -> T:
        """`call` with this thread's client."""
        return call(self.client())

    def submit(self, call: Callable[[C], T]) -> Future[T]:
        """`call` on one of the pool's threads, with that thread's client."""
        with self._lock:
            if self._executor is None:  # threads start with the first query, not before
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix=self._name)
            return self._executor.submit(self.run_here, call)

    def close(self) -> None:
        """Stop the pool's threads (a query still out is waited for) and close the clients
        it made that can be closed (their HTTP connections); a query sent after this starts
        the threads again and its thread's client opens new connections. The source that owns
        the pool calls it from its own `close`."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            made = list(self._made) if self._owns_clients else []
        for client in made:
            close_source(client)  # a client is closed as a source is, when it can be

    @contextlib.contextmanager
    def batch(self) -> Iterator[Batch[C]]:
        """A cycle's queries; every one is done or cancelled when this closes."""
        batch = Batch(self)
        try:
            yield batch
        finally:
            batch.settle()


class Batch(Generic[C]):
    """The queries of one cycle (`QueryPool.batch`)."""

    def __init__(self, pool: QueryPool[C]) -> None:
        self._pool = pool
        self._sent: list[Future[Any]] = []

    def send(self, call: Callable[[C], T]) -> Callable[[], T]:
        """`call(client)` sent now (on one worker: when its answer is first asked for); the
        function returned gives its result or raises its exception."""
        if self._pool.workers == 1:
            return functools.cache(functools.partial(self._pool.run_here, call))
        future = self._pool.submit(call)
        self._sent.append(future)
        return future.result

    def alongside(self, call: Callable[[], T]) -> Callable[[], T]:
        """`call()`, which needs no client, run now in the calling thread (on one worker:
        when its answer is first asked for, as `send`); the function returned gives its
        result or raises its exception. Send the queries first: they run meanwhile."""
        if self._pool.workers == 1:
            return functools.cache(call)
        done: Future[T] = Future()
        try:
            done.set_result(call())
        except Exception as exc:  # raised when its answer is asked for, in the caller's order
            done.set_exception(exc)
        return done.result

    def settle(self) -> None:
        """Cancel what no thread has started; wait for the rest (their answers or errors are
        dropped: the caller took what it needed)."""
        for future in self._sent:
            future.cancel()
        wait(self._sent)
