"""The worker's throughput figures between two log lines."""

from __future__ import annotations

import time

from streams.kafka.core_process import BatchResult

__all__ = ["BatchStats"]


class BatchStats:
    """Windows per second, where the time went, and how old the windows were when their batch
    began (Kafka timestamp to now: the wait before the agent), since the last report. Phases:
    ``core`` the batch step (in the core process); ``wait`` the agent waiting for it beyond
    the step itself (moving the batch and its result between the processes); ``previous``
    waiting for the batch before to finish; ``queue`` queueing the outputs (Kafka, InfluxDB);
    ``deliver`` waiting for their acknowledgements; ``persist`` the changelog; ``ack`` the
    windows' acknowledgement. ``deliver``, ``persist`` and ``ack`` overlap the next batch's
    ``core`` (:mod:`streams.kafka.batch_flow`)."""

    PHASES = ("core", "wait", "previous", "queue", "deliver", "persist", "ack")

    def __init__(self) -> None:
        self.windows = 0
        self.replays = 0
        self.batches = 0
        self.seconds = dict.fromkeys(self.PHASES, 0.0)
        self.ages: list[float] = []
        self.since = time.monotonic()

    def add(self, result: BatchResult, seconds: dict[str, float]) -> None:
        """A finished batch: its phases' seconds as :class:`streams.kafka.batch_flow.BatchFlow`
        measured them (``run`` split into ``core`` and ``wait``)."""
        self.windows += result.windows
        self.replays += result.replays
        self.batches += 1
        split = {**seconds, "core": result.seconds, "wait": seconds["run"] - result.seconds}
        for phase in self.PHASES:
            self.seconds[phase] += split[phase]

    def age(self, seconds: float) -> None:
        """How long the oldest window of a batch waited before the agent took it."""
        self.ages.append(seconds)

    def take(self) -> str | None:
        now = time.monotonic()
        span, self.since = now - self.since, now
        if not self.batches:
            return None
        parts = ", ".join(f"{p} {1e3 * s / self.windows:.3f}" for p, s in self.seconds.items())
        line = (f"{self.windows / span:.0f} windows/s in {self.batches} batches; "
                f"ms per window: {parts}")
        if self.ages:
            line += f"; oldest window at batch start: {1e3 * max(self.ages):.0f} ms"
        if self.replays:
            line += f"; {self.replays} replays skipped (windows seen before unchanged)"
        self.windows, self.batches, self.replays = 0, 0, 0
        self.seconds = dict.fromkeys(self.PHASES, 0.0)
        self.ages = []
        return line
