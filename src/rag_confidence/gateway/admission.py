"""Bounded concurrency with backpressure, shared by both listeners.

``max_active`` requests are processed at once; up to ``max_waiting`` more wait (at most ``timeout`` seconds)
for a slot. Beyond that a request is refused at once with a retryable status, before its body is read (HTTP),
so memory stays bounded by (active + waiting) x the request size limit however hard clients push.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..errors import GatewayOverloadedError


class Admission:
    """An asyncio semaphore with a bounded waiting room.

    >>> async def demo() -> int:
    ...     admission = Admission(max_active=1, max_waiting=0, timeout=1.0)
    ...     async with admission.slot():
    ...         try:
    ...             async with admission.slot():
    ...                 return 0
    ...         except GatewayOverloadedError:
    ...             return admission.active
    >>> asyncio.run(demo())
    1
    """

    def __init__(self, max_active: int, max_waiting: int, timeout: float) -> None:
        self._semaphore = asyncio.Semaphore(max_active)
        self._max_active = max_active
        self._max_waiting = max_waiting
        self._timeout = timeout
        self.active = 0
        self.waiting = 0

    @asynccontextmanager
    async def slot(self, timeout: float | None = None) -> AsyncIterator[None]:
        """Hold a processing slot; raises :class:`GatewayOverloadedError` when none is free within the bounds."""
        if self.active >= self._max_active and self.waiting >= self._max_waiting:
            raise GatewayOverloadedError(f"{self.active} requests in progress and {self.waiting} waiting")
        wait = self._timeout if timeout is None else max(0.0, min(timeout, self._timeout))
        if not self._semaphore.locked():
            # A slot is free: taken without suspending. (wait_for with a zero timeout would give up before
            # even a free semaphore is acquired.)
            await self._semaphore.acquire()
        elif wait <= 0:
            raise GatewayOverloadedError(
                f"{self.active} requests in progress and waiting is off (queue timeout 0)"
            )
        else:
            self.waiting += 1
            try:
                await asyncio.wait_for(self._semaphore.acquire(), wait)
            except asyncio.TimeoutError:
                raise GatewayOverloadedError(f"no processing slot within {wait:.1f}s") from None
            finally:
                self.waiting -= 1
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            self._semaphore.release()
