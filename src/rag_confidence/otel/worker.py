"""A single background thread that runs jobs in submission order: where the processor scores answers when
``background_scoring=True``, so the application thread that ends an answer span does not wait for scoring."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["BackgroundWorker"]

_logger = logging.getLogger(__name__)

Job = Callable[[], None]
_EXIT_FLUSH_S = 10.0


class BackgroundWorker:
    """Runs submitted jobs on one daemon thread, at most ``max_queue`` waiting.

    ``submit`` never blocks: it returns False when the queue is full or the worker stopped, and the caller
    runs the job itself. ``flush`` waits until every submitted job has finished. The thread starts on first
    use and again in a forked child (threads do not survive ``fork``), so a pre-fork server works.
    """

    def __init__(self, name: str, max_queue: int) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be positive")
        self._name = name
        self._max_queue = max_queue
        self._jobs: deque[Job] = deque()
        self._condition = threading.Condition()
        self._running = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pid = 0

    def submit(self, job: Job) -> bool:
        with self._condition:
            if self._stopping or len(self._jobs) >= self._max_queue:
                return False
            if self._thread is None or self._pid != os.getpid():
                self._start()
            self._jobs.append(job)
            self._condition.notify_all()
            return True

    def queued(self) -> int:
        """Jobs waiting (not counting the one running)."""
        return len(self._jobs)  # one atomic read: a gauge needs no lock

    def flush(self, timeout_s: float) -> bool:
        """Wait until all submitted jobs have run; False when ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        with self._condition:
            while self._jobs or self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def stop(self, timeout_s: float) -> None:
        """Refuse new jobs, let the queue drain for up to ``timeout_s``, then run what is left right here:
        a job forwards a span, so none may be dropped."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        self.flush(timeout_s)
        while True:
            with self._condition:
                if not self._jobs:
                    break
                job = self._jobs.popleft()
            _run(job)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, timeout_s))

    def _start(self) -> None:
        # Called with the condition held. After a fork the parent's thread is gone; its queued jobs are kept.
        if not self._pid:
            # atexit runs handlers last-registered-first: registered on first use, after the application set up
            # its meter and logger providers, this drains the queue before they shut down, so the metrics and
            # events of the last answers are still exported.
            atexit.register(self.flush, _EXIT_FLUSH_S)
        self._pid = os.getpid()
        self._running = 0
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._condition:
                while not self._jobs and not self._stopping:
                    self._condition.wait()
                if not self._jobs:
                    return
                job = self._jobs.popleft()
                self._running += 1
            try:
                _run(job)
            finally:
                with self._condition:
                    self._running -= 1
                    self._condition.notify_all()


def _run(job: Job) -> None:
    try:
        job()
    except Exception:  # jobs handle their own errors; this is the last line of defence for the thread
        _logger.exception("rag-confidence: a background job failed")
