"""QueryPool: every thread that runs a query has a client of its own (no session is shared
between threads), made once and kept; one worker sends nothing until asked."""

from __future__ import annotations

import itertools
import threading

import pytest

from policyd.sources.query_pool import MAX_WORKERS, QueryPool


class Client:
    """What `connect` makes: a numbered object that notes the threads using it."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.threads: set[str] = set()


def counting_connect() -> tuple[list[Client], QueryPool[Client]]:
    made: list[Client] = []
    numbers = itertools.count()

    def connect() -> Client:
        made.append(Client(next(numbers)))
        return made[-1]

    return made, QueryPool(connect, workers=3)


def test_each_query_thread_has_its_own_client_made_once() -> None:
    made, pool = counting_connect()
    together = threading.Barrier(3, timeout=10)  # three queries in flight at once

    def query(client: Client) -> int:
        client.threads.add(threading.current_thread().name)
        together.wait()
        return client.number

    for _cycle in range(2):
        with pool.batch() as batch:
            answers = [batch.send(query) for _ in range(3)]
            assert sorted(answer() for answer in answers) == [0, 1, 2]
    assert len(made) == 3  # the second cycle's threads kept their clients
    assert all(len(client.threads) == 1 for client in made)  # and never lent them out


def test_one_worker_sends_nothing_until_the_answer_is_asked_for() -> None:
    asked: list[str] = []
    pool = QueryPool(lambda: Client(0), workers=1)
    with pool.batch() as batch:
        first = batch.send(lambda client: asked.append("first"))
        batch.send(lambda client: asked.append("never asked for"))
        assert asked == []
        first()
        first()  # asked twice, sent once
    assert asked == ["first"]


@pytest.mark.parametrize(("workers", "ran_at_once"), [(1, []), (3, ["list"])])
def test_a_read_alongside_runs_in_the_calling_thread_at_once_or_when_asked_for(
        workers: int, ran_at_once: list[str]) -> None:
    # Several workers: now, while the queries sent before it are out; one: where it always
    # ran. Its error is raised when its answer is asked for, not before.
    ran: list[str] = []
    threads: list[str] = []

    def read() -> None:
        ran.append("list")
        threads.append(threading.current_thread().name)
        raise OSError("the API is down")

    with QueryPool(lambda: Client(0), workers=workers).batch() as batch:
        listed = batch.alongside(read)
        assert ran == ran_at_once
        with pytest.raises(OSError, match="the API is down"):
            listed()
    assert ran == ["list"] and threads == [threading.current_thread().name]


@pytest.mark.parametrize("workers", [0, MAX_WORKERS + 1])
def test_the_bound_is_1_to_max_workers(workers: int) -> None:
    with pytest.raises(ValueError, match=f"workers must be 1 to {MAX_WORKERS}"):
        QueryPool(lambda: Client(0), workers=workers)


def test_closing_the_pool_stops_its_threads_and_a_later_query_starts_them_again() -> None:
    pool = QueryPool(lambda: Client(0), workers=2, name="closing-test")

    def alive() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("closing-test")]

    def name(client: Client) -> str:
        return threading.current_thread().name

    with pool.batch() as batch:
        assert batch.send(name)().startswith("closing-test")
    assert alive()
    pool.close()
    assert alive() == []
    pool.close()  # twice is harmless
    with pool.batch() as batch:
        assert batch.send(name)().startswith("closing-test")
    pool.close()
    assert alive() == []


class Closable(Client):
    """A client that notes how often it was closed."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_closing_the_pool_closes_the_clients_it_made_but_not_a_given_one() -> None:
    made: list[Closable] = []
    numbers = itertools.count()

    def connect() -> Closable:
        made.append(Closable(next(numbers)))
        return made[-1]

    pool = QueryPool(connect, workers=2)
    together = threading.Barrier(2, timeout=10)

    def query(client: Closable) -> int:
        together.wait()
        return client.number

    with pool.batch() as batch:
        answers = [batch.send(query) for _ in range(2)]
        assert sorted(answer() for answer in answers) == [0, 1]
    assert pool.run_here(lambda client: client.number) == 2  # the calling thread's own
    pool.close()
    assert [client.closed for client in made] == [1, 1, 1]

    given = Closable(7)
    shared = QueryPool(lambda: given, workers=1, owns_clients=False)
    assert shared.run_here(lambda client: client.number) == 7
    shared.close()
    assert given.closed == 0  # the caller's, not the pool's
