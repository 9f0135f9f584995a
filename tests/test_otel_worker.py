"""The background worker the processor scores on: order, bounded queue, flush, and no job lost at stop."""

from __future__ import annotations

import threading

import pytest

from rag_confidence.otel.worker import BackgroundWorker


def test_jobs_run_in_order_and_flush_waits_for_them() -> None:
    worker = BackgroundWorker("test", max_queue=100)
    done: list[int] = []
    for index in range(50):
        assert worker.submit(lambda index=index: done.append(index))
    assert worker.flush(10.0) is True
    assert done == list(range(50))
    worker.stop(1.0)


def test_a_full_queue_refuses_and_stop_runs_what_is_left_in_the_caller() -> None:
    worker = BackgroundWorker("test", max_queue=2)
    release = threading.Event()
    started = threading.Event()
    ran: list[str] = []

    def blocking() -> None:
        started.set()
        release.wait(10)
        ran.append("blocking")

    assert worker.submit(blocking)
    assert started.wait(10)
    assert worker.submit(lambda: ran.append("a"))
    assert worker.submit(lambda: ran.append("b"))
    assert worker.submit(lambda: ran.append("c")) is False  # full: the caller runs it itself
    assert worker.flush(0.05) is False
    worker.stop(0.05)  # the thread is stuck in `blocking`: the queued jobs run here instead
    assert ran == ["a", "b"]
    assert worker.submit(lambda: None) is False  # stopped
    release.set()


def test_a_failing_job_does_not_stop_the_worker() -> None:
    worker = BackgroundWorker("test", max_queue=10)
    ran: list[int] = []

    def failing() -> None:
        raise RuntimeError("job bug")

    worker.submit(failing)
    worker.submit(lambda: ran.append(1))
    assert worker.flush(10.0)
    assert ran == [1]
    worker.stop(1.0)


def test_queue_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        BackgroundWorker("test", max_queue=0)
