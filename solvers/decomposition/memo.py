"""What the solves of one model share: values that depend on their key only, never on ``N``,
so that sharing them changes no answer (:class:`SolveMemo`)."""

from __future__ import annotations

from typing import Any


class Memo:
    """A bounded memo of values that depend on their key only (read-only arrays): emptied when
    ``limit`` keys are held."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self._held.get(key)

    def put(self, key: Any, value: Any) -> Any:
        if len(self._held) >= self.limit:
            self._held.clear()
        self._held[key] = value
        return value

    def clear(self) -> None:
        """Forget every value held (a benchmark's or a test's fresh start)."""
        self._held.clear()

    def __len__(self) -> int:
        """The keys held."""
        return len(self._held)


class SolveMemo:
    """What the solves of one model share (a capacity search's probes, the prediction at the
    current users): pass the same one to :func:`solvers.decomposition.solve_decomposed` for
    each. Its entries depend on their key only, never on ``N``, so sharing changes no answer:

    * ``heads`` -- the per-job chains' transitions out of levels ``0..c+1``
      (:func:`solvers.decomposition.stations._per_job_head`) by service process and cores, the
      same for every population above ``c + 1``;
    * ``prefixes`` -- ``log G_E(k)`` and ``E[n_m | k users]`` of the exponential part by
      (means, cores, ``Z``), computed at the largest ``N`` asked
      (:func:`solvers.decomposition.fes.shared_prefix`).

    Bounded (32 and 64 keys, emptied when full); not for use by two threads at once."""

    def __init__(self) -> None:
        self.heads = Memo(32)
        self.prefixes = Memo(64)
