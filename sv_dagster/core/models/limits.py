"""Per-endpoint request limits: a concurrency cap that halves on 429 and grows back one
step per window of successes (AIMD, as TCP does), plus an optional requests-per-minute
cap (aiolimiter's leaky bucket)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiolimiter import AsyncLimiter


class AdaptiveConcurrency:
    def __init__(self, maximum: int, minimum: int = 1, requests_per_minute: int | None = None) -> None:
        self.maximum = max(1, maximum)
        self.minimum = max(1, min(minimum, self.maximum))
        self.limit = self.maximum
        self.in_flight = 0
        self.peak_in_flight = 0
        self.lowest_limit = self.maximum
        self.throttle_events = 0
        self._successes = 0
        self._rpm = requests_per_minute
        # Created on first use, inside the event loop that runs the requests.
        self._condition: asyncio.Condition | None = None
        self._rate: AsyncLimiter | None = None

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._condition is None:
            self._condition = asyncio.Condition()
            # Capacity of one second's worth: a per-minute cap must not allow a burst of a minute.
            self._rate = AsyncLimiter(self._rpm / 60.0, 1.0) if self._rpm else None
        async with self._condition:
            await self._condition.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self._rate is not None:
                await self._rate.acquire()
            yield
        finally:
            async with self._condition:
                self.in_flight -= 1
                self._condition.notify_all()

    def throttled(self) -> None:
        """The endpoint said 429: halve the concurrency."""
        self.throttle_events += 1
        self.limit = max(self.minimum, self.limit // 2)
        self.lowest_limit = min(self.lowest_limit, self.limit)
        self._successes = 0

    def succeeded(self) -> None:
        """One more success; after `limit` of them in a row, allow one more request."""
        self._successes += 1
        if self._successes >= self.limit and self.limit < self.maximum:
            self.limit += 1
            self._successes = 0

    def stats(self) -> dict[str, int]:
        return {
            "max_concurrency": self.maximum,
            "final_limit": self.limit,
            "lowest_limit": self.lowest_limit,
            "peak_in_flight": self.peak_in_flight,
            "throttle_events": self.throttle_events,
        }
