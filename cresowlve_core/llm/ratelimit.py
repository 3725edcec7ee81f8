"""A small async token bucket, used for requests-per-minute and tokens-per-minute limits.

The bucket holds at most ``per_minute`` units and refills continuously at ``per_minute / 60``
units per second. ``acquire(n)`` waits until ``n`` units are available and takes them. A request
larger than the whole bucket waits for a full bucket and then drives it negative (a debt that
later callers wait out), so a huge request can never deadlock. ``adjust(delta)`` corrects an
earlier charge once the true amount is known (e.g. tokens actually used after a call).
"""

from __future__ import annotations

import asyncio
import time

from cresowlve_core.failures import InputError


class AsyncTokenBucket:
    """Continuous-refill token bucket for one asyncio event loop."""

    def __init__(self, per_minute: float) -> None:
        if per_minute <= 0:
            raise InputError("per_minute must be positive")
        self.capacity = float(per_minute)
        self.rate_per_s = float(per_minute) / 60.0
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate_per_s)
        self._stamp = now

    @property
    def available(self) -> float:
        """Units available right now (may be negative while a debt is being paid off)."""
        self._refill()
        return self._tokens

    async def acquire(self, n: float = 1.0) -> None:
        """Wait until ``n`` units (at most a full bucket) are available, then take ``n``."""
        need = min(float(n), self.capacity)
        async with self._lock:  # FIFO fairness: one waiter at a time
            while True:
                self._refill()
                if self._tokens >= need:
                    self._tokens -= float(n)
                    return
                await asyncio.sleep((need - self._tokens) / self.rate_per_s)

    def adjust(self, delta: float) -> None:
        """Charge ``delta`` more units (negative = refund), never above capacity."""
        self._refill()
        self._tokens = min(self.capacity, self._tokens - float(delta))
