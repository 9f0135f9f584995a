"""A single background thread that runs jobs in submission order: where the processor scores answers when
``background_scoring=True``, so the application thread that ends an answer span does not wait for scoring."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from .failures import describe_failure

__all__ = ["BackgroundWorker", "call_if_alive"]

_logger = logging.getLogger(__name__)

Job = Callable[[], None]
_EXIT_FLUSH_S = 10.0


class BackgroundWorker:
    """Runs submitted jobs on one daemon thread, at most ``max_queue`` waiting.

    ``submit`` never blocks: it returns False when the queue is full or the worker stopped, and the caller
    runs the job itself. ``flush`` waits until the jobs submitted before it have finished. The thread starts
    on first use. A forked child starts empty: the jobs queued at the fork are the parent's to run (the child
    would forward their spans a second time), and the lock is new (the parent's thread may have held it).
    """

    def __init__(self, name: str, max_queue: int) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be positive")
        self._name = name
        self._max_queue = max_queue
        self._jobs: deque[Job] = deque()
        self._condition = threading.Condition()
        # Jobs queued and jobs finished since creation: flush waits for the count queued when it was called,
        # so a steady stream of new jobs cannot hold it until its timeout.
        self._submitted = 0
        self._finished = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._exit_hook: weakref.finalize[Any, Any] | None = None
        _WORKERS.add(self)

    def submit(self, job: Job) -> bool:
        with self._condition:
            if self._stopping or len(self._jobs) >= self._max_queue:
                return False
            if self._thread is None:
                self._start()
            self._jobs.append(job)
            self._submitted += 1
            self._condition.notify_all()
            return True

    def queued(self) -> int:
        """Jobs waiting (not counting the one running)."""
        return len(self._jobs)  # one atomic read: a gauge needs no lock

    def flush(self, timeout_s: float) -> bool:
        """Wait until the jobs submitted before this call have run; False when ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        with self._condition:
            target = self._submitted
            while self._finished < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def stop(self, timeout_s: float) -> None:
        """Refuse new jobs, let the queue drain for up to ``timeout_s``, then run what is left right here:
        a job forwards a span, so none may be dropped."""
        deadline = time.monotonic() + timeout_s
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        self.flush(timeout_s)
        while True:
            with self._condition:
                if not self._jobs:
                    break
                job = self._jobs.popleft()
            try:
                _run(job)
            finally:
                with self._condition:
                    self._finished += 1
                    self._condition.notify_all()
        thread = self._thread
        if thread is not None and thread.ident is not None and thread is not threading.current_thread():
            # What is left of the timeout: a thread stuck in a job already cost the drain all of it.
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._exit_hook is not None:
            self._exit_hook()  # unregisters the exit flush: nothing is left to flush

    def _start(self) -> None:
        # Called with the condition held.
        if self._exit_hook is None:
            # atexit runs handlers last-registered-first: registered on first use, after the application set up
            # its meter and logger providers, this drains the queue before they shut down, so the metrics and
            # events of the last answers are still exported. Through a weak reference: a worker its processor
            # dropped without shutting down is not kept alive by the registry. The hook is this worker's own
            # object, unregistered when it stops or is collected, so processors created and shut down one
            # after another leave nothing behind.
            hook = functools.partial(call_if_alive, weakref.WeakMethod(self.flush), _EXIT_FLUSH_S)
            atexit.register(hook)
            self._exit_hook = weakref.finalize(self, atexit.unregister, hook)
            # weakref.finalize calls pending finalizers at exit, from its own atexit handler (registered
            # after this hook, so run before it): that would unregister the flush just before its turn.
            self._exit_hook.atexit = False
        thread = threading.Thread(target=_loop, args=(weakref.ref(self),), name=self._name, daemon=True)
        thread.start()  # may raise (no thread can be started): the next submit tries again
        self._thread = thread

    def _next_job(self) -> Job | None:
        """The next job, once there is one; None when stopped with nothing left (the thread then ends)."""
        with self._condition:
            while not self._jobs and not self._stopping:
                self._condition.wait(_IDLE_CHECK_S)
                if not self._jobs and not self._stopping:
                    return _IDLE
            if not self._jobs:
                return None
            return self._jobs.popleft()

    def _job_done(self) -> None:
        with self._condition:
            self._finished += 1
            self._condition.notify_all()

    def _after_fork_in_child(self) -> None:
        # The parent's thread does not exist here, and may have held the lock when the process forked; the jobs
        # queued at the fork stay the parent's (its thread runs them and forwards their spans).
        self._condition = threading.Condition()
        self._jobs = deque()
        self._submitted = self._finished = 0
        self._thread = None


def _idle() -> None:
    pass


# Returned by ``_next_job`` after a quiet spell, so the thread lets go of its worker between jobs: a worker whose
# processor was dropped without shutdown is then collected, and its thread ends.
_IDLE: Job = _idle
_IDLE_CHECK_S = 5.0


def _loop(worker_ref: weakref.ref[BackgroundWorker]) -> None:
    while True:
        worker = worker_ref()
        if worker is None:
            return
        # Held while there are jobs (queued jobs are spans to forward: the worker must outlive them), let go of
        # only when the queue stayed empty for a while.
        while True:
            job = worker._next_job()
            if job is None:
                return
            if job is _IDLE:
                break
            try:
                _run(job)
            finally:
                del job  # the job holds a span (and its processor): not kept alive until the next one
                worker._job_done()
        del worker


_WORKERS: weakref.WeakSet[BackgroundWorker] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for worker in list(_WORKERS):
        worker._after_fork_in_child()


# One hook for all workers (a hook per worker could never be removed: each would cost every later fork).
os.register_at_fork(after_in_child=_after_fork_in_child)


def call_if_alive(method: weakref.WeakMethod[Any], *args: object) -> None:
    """Call the method behind a weak reference, if its object is still alive (at-fork and atexit hooks must not
    keep what they serve alive)."""
    bound = method()
    if bound is not None:
        bound(*args)


def _run(job: Job) -> None:
    try:
        job()
    # Jobs handle their own errors; this is the last line of defence for the thread.
    except Exception as error:
        _logger.error("rag-confidence: a background job failed\n%s", describe_failure(error))
