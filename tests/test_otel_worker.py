"""The background worker the processor scores on: order, bounded queue, flush, and no job lost at stop."""

from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from typing import Any

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


def test_stop_keeps_to_its_timeout_when_a_job_is_stuck() -> None:
    # The processor's shutdown promises 30 s at most; with a job stuck in the downstream it took twice that
    # (the drain waited the timeout out, then the join of the thread waited it out again).
    worker = BackgroundWorker("test", max_queue=4)
    release = threading.Event()
    started = threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(30)

    assert worker.submit(stuck)
    assert started.wait(10)
    begun = time.monotonic()
    worker.stop(1.0)
    took = time.monotonic() - begun
    release.set()
    assert 1.0 <= took < 1.6


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


# -- found by a lifecycle review: flush under load, fork, processors never shut down ---------------------------


def test_flush_waits_for_the_jobs_before_it_not_for_those_submitted_meanwhile() -> None:
    worker = BackgroundWorker("test", max_queue=10_000)
    first_started = threading.Event()
    release = threading.Event()
    ran: list[str] = []

    def first() -> None:
        first_started.set()
        release.wait(10)
        ran.append("first")

    worker.submit(first)
    assert first_started.wait(10)
    flushed: list[bool] = []
    flusher = threading.Thread(target=lambda: flushed.append(worker.flush(10.0)))
    flusher.start()

    def slow() -> None:
        time.sleep(0.01)
        ran.append("later")

    for _ in range(300):  # ~3 s of work submitted after the flush began: before, flush waited for it all
        worker.submit(slow)
    started = time.monotonic()
    release.set()
    flusher.join(10)
    assert flushed == [True]
    assert time.monotonic() - started < 2.0
    assert ran[0] == "first"
    worker.stop(10.0)
    assert ran.count("later") == 300  # and none of them is lost


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_a_forked_child_starts_empty_and_the_parent_runs_what_was_queued() -> None:
    worker = BackgroundWorker("test", max_queue=100)
    started = threading.Event()
    release = threading.Event()
    ran: list[int] = []
    worker.submit(lambda: (started.set(), release.wait(10), ran.append(0)))
    assert started.wait(10)
    for index in (1, 2, 3):
        worker.submit(lambda index=index: ran.append(index))
    pid = os.fork()
    if pid == 0:  # the child: nothing inherited to run, a working queue (the parent's thread held its lock)
        status = 0
        try:
            child_ran: list[int] = []
            if worker.queued() != 0 or not worker.flush(1.0):
                status = 1
            elif not worker.submit(lambda: child_ran.append(9)) or not worker.flush(5.0) or child_ran != [9]:
                status = 2
            elif ran:  # the parent's queued jobs never ran here
                status = 3
        finally:
            os._exit(status)
    release.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert worker.flush(10.0)
    assert ran == [0, 1, 2, 3]  # each queued job ran once, in the parent
    worker.stop(1.0)


def _exit_hook(worker: BackgroundWorker) -> weakref.ref[Any]:
    """A weak reference to the worker's exit-flush hook (the object atexit holds while it is registered)."""
    assert worker._exit_hook is not None
    peeked = worker._exit_hook.peek()
    assert peeked is not None
    _, _, (hook,), _ = peeked
    return weakref.ref(hook)


def test_a_worker_dropped_without_stop_is_collected_and_its_thread_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rag_confidence.otel import worker as worker_module

    monkeypatch.setattr(worker_module, "_IDLE_CHECK_S", 0.05)  # how long an idle thread holds on (5 s)
    worker = BackgroundWorker("test-dropped", max_queue=10)
    worker.submit(lambda: None)
    assert worker.flush(10.0)
    thread = worker._thread
    hook = _exit_hook(worker)
    reference = weakref.ref(worker)
    del worker
    deadline = time.monotonic() + 10
    while reference() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    # Before, its thread and the atexit registry kept it (and the processor holding it) alive for good.
    assert reference() is None
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive()
    gc.collect()
    assert hook() is None  # its exit flush was unregistered with it


def test_a_stopped_worker_leaves_no_exit_hook_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    # Processors created and shut down one after another (a test suite, a reloading app) each registered an
    # exit flush that atexit kept for good. CPython's atexit.unregister releases the callable (its slot count,
    # atexit._ncallbacks(), does not go down), so the test watches the hook objects themselves.
    from rag_confidence.otel import worker as worker_module

    monkeypatch.setattr(worker_module, "_IDLE_CHECK_S", 0.05)
    stopped = BackgroundWorker("test-stopped", max_queue=10)
    stopped.submit(lambda: None)
    hook = _exit_hook(stopped)
    gc.collect()
    assert hook() is not None  # registered: a running worker is flushed at exit
    stopped.stop(5.0)
    gc.collect()
    assert hook() is None


def test_a_thread_that_cannot_start_is_retried_and_stop_still_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = BackgroundWorker("test-start", max_queue=10)
    real_start = threading.Thread.start
    failures = [RuntimeError("can't start new thread")]

    def start_once_failing(thread: threading.Thread) -> None:
        if failures:
            raise failures.pop()
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_once_failing)
    ran: list[int] = []
    with pytest.raises(RuntimeError):
        worker.submit(lambda: ran.append(1))  # the processor runs the job itself then
    # Before: the unstarted thread was kept, later jobs queued for nobody, and stop() raised on join.
    assert worker.submit(lambda: ran.append(2))
    assert worker.flush(10.0)
    worker.stop(1.0)
    assert ran == [2]
