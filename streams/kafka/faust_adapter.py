"""Every use perfcast makes of faust-streaming's, aiokafka's and mode's internals, in one place.

Faust offers no setting or hook for a few things the worker needs (``docs/benchmarks.md``
gives the figures behind each), so these functions reach past the public API. Nothing else
in ``streams`` touches a private attribute of these libraries; ``tests/test_faust_adapter.py``
checks every one of them against the installed libraries (real classes and objects, no
mocks), so an upgrade that renames or removes one fails that test with the attribute's name.

Private attributes and methods used, each through one function here (checked against
faust-streaming 0.15.3, aiokafka 0.14.0 and mode-streaming 0.7.1, the versions installed when
this module was written):

* ``faust.transport.drivers.aiokafka.Consumer._thread`` (an ``AIOKafkaConsumerThread``), its
  ``._consumer`` (an ``aiokafka.AIOKafkaConsumer``) and that one's ``._fetcher`` (an
  ``aiokafka.consumer.fetcher.Fetcher``): :func:`fetcher_of`. Why: the fetcher holds the
  settings below, which Faust does not expose.
* ``Fetcher._fetch_max_wait_ms`` and ``Fetcher._fetch_min_bytes``: :func:`set_fetch_limits`.
  Why: Faust fixes the broker-side fetch wait at 1,500 ms, which stalled the source every
  ~1.5 s, and aiokafka's 1-byte least fetch cost a round trip per few records
  (``streams.kafka.worker.tune_fetches``).
* ``faust.transport.consumer.Consumer._read_offset``: :func:`read_offsets`. Why: the backlog
  that lets a batch close early when the worker has caught up (``streams.kafka.batching.backlog``).
* ``faust.transport.consumer.Consumer._commit_offsets``: :func:`commit_offsets`. Why: Faust
  has no public call that commits given offsets; the worker commits the offsets of the
  windows it finished itself, periodically and before handing a partition over
  (``streams.kafka.handover``).
* ``faust.Stream._enable_passive``: :func:`enable_passive`. Why: drains the stream in the
  background so its processors see every event, exactly as ``Stream.take_events`` does
  (``streams.kafka.batching.adaptive_batches``).
* ``mode.Service._stopped`` and ``._crashed``: :func:`stop_events`. Why: the events ``mode``'s
  ``Service.wait_first`` races; the delivery fast path stands aside once either is set.
* ``mode.Service.wait_first``, replaced on the consumer instance, and a marker attribute
  ``_perfcast_direct`` set on it: :func:`replace_wait_first`, :func:`has_replaced_wait_first`.
  Why: records reach the agent without four asyncio tasks each (``streams.kafka.delivery``).
* ``mode.services.WaitResults`` (not exported by ``mode``'s package): :func:`wait_results`.
  Why: the fast path returns what ``wait_first`` returns.
* ``faust.Worker.spinner``, set to ``None``: :func:`disable_spinner`. Why: with the spinner,
  Faust's worker sets the root logger to DEBUG and every debug call of aiokafka, Faust and mode
  builds a record (``streams.kafka.worker.faust_worker``).

Behaviour relied upon, also checked by the test: Faust's ``Consumer._drain_messages`` hands
each record over as ``self.wait_first(callback(message), self.suspend_flow.wait())`` (the
shape the delivery fast path recognises); a stream with ``enable_acks = False`` leaves
acknowledging to its caller (the exactly-once ack path of ``streams.kafka.batching``).

Versions: :func:`check_versions` (called by ``streams.kafka.worker.build_app``) refuses to build the
worker on a version outside :data:`SUPPORTED`, with a message naming the package, its version
and the range, because a silent change in these internals could break the acknowledgement
path rather than just slow the worker. To support a new version: install it, run
``tests/test_faust_adapter.py`` and the worker tests, then widen :data:`SUPPORTED` and the pins
in ``pyproject.toml`` together.
"""

from __future__ import annotations

import re
from importlib import metadata
from types import MappingProxyType
from typing import Any, Callable, Mapping

from mode.services import WaitResults

__all__ = ["SUPPORTED", "UnsupportedFramework", "check_versions", "commit_offsets",
           "committed_offsets", "disable_spinner", "enable_passive", "fetcher_of",
           "has_replaced_wait_first", "installed_versions", "read_offsets",
           "replace_wait_first", "set_fetch_limits", "stop_events", "unsupported_versions",
           "wait_results"]

#: the distributions whose internals this module uses: (lowest supported version, first
#: unsupported version); the same ranges as the pins in ``pyproject.toml``
SUPPORTED: Mapping[str, tuple[str, str]] = MappingProxyType({
    "faust-streaming": ("0.15.3", "0.16"),
    "aiokafka": ("0.14.0", "0.15"),
    "mode-streaming": ("0.7.1", "0.8"),
})

#: the marker :func:`replace_wait_first` leaves on the consumer
_MARKER = "_perfcast_direct"


class UnsupportedFramework(RuntimeError):
    """An installed faust-streaming, aiokafka or mode-streaming outside :data:`SUPPORTED`."""


def _release(version: str) -> tuple[int, ...] | None:
    """The numeric release of a version string (``"0.15.3.post1"`` -> ``(0, 15, 3)``; a
    pre-release counts as its release: ``"0.16.0rc1"`` is outside ``<0.16``)."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(p) for p in match.group(0).split(".")) if match else None


def installed_versions() -> dict[str, str | None]:
    """The installed version of each distribution of :data:`SUPPORTED` (``None``: absent)."""
    found: dict[str, str | None] = {}
    for name in SUPPORTED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _within(version: str | None, low: str, high: str) -> bool:
    """``low <= version < high`` by numeric release (an unreadable version is not)."""
    release = _release(version) if version is not None else None
    first, end = _release(low), _release(high)
    return (release is not None and first is not None and end is not None
            and first <= release < end)


def unsupported_versions(installed: Mapping[str, str | None],
                         supported: Mapping[str, tuple[str, str]] | None = None) -> list[str]:
    """One sentence per distribution whose version in ``installed`` is outside its range in
    ``supported`` (default :data:`SUPPORTED`)."""
    problems = []
    for name, (low, high) in (SUPPORTED if supported is None else supported).items():
        version = installed.get(name)
        if not _within(version, low, high):
            shown = "not installed" if version is None else f"{version!r} is installed"
            problems.append(f"{name}: {shown}, perfcast's worker supports >={low},<{high}")
    return problems


def check_versions(installed: Mapping[str, str | None] | None = None) -> None:
    """Raise :class:`UnsupportedFramework` naming every distribution outside
    :data:`SUPPORTED` (default: the installed versions)."""
    problems = unsupported_versions(installed_versions() if installed is None else installed)
    if problems:
        raise UnsupportedFramework(
            "; ".join(problems) + " (streams/kafka/faust_adapter.py reaches into their internals; "
            "install the versions pyproject.toml pins)")


def fetcher_of(app: Any) -> Any:
    """aiokafka's ``Fetcher`` of the app's (started) source consumer:
    ``app.consumer._thread._consumer._fetcher``."""
    return app.consumer._thread._consumer._fetcher


def set_fetch_limits(app: Any, wait_ms: int, min_bytes: int) -> None:
    """Set the fetcher's ``_fetch_max_wait_ms`` and ``_fetch_min_bytes`` (both, or neither:
    raises ``AttributeError`` naming the missing attribute)."""
    fetcher = fetcher_of(app)
    fetcher._fetch_max_wait_ms  # noqa: B018 -- both must exist before either is set
    fetcher._fetch_min_bytes  # noqa: B018
    fetcher._fetch_max_wait_ms = int(wait_ms)
    fetcher._fetch_min_bytes = int(min_bytes)


def read_offsets(consumer: Any) -> Mapping[Any, int | None]:
    """Faust's consumer's last read offset per topic partition (``_read_offset``)."""
    return consumer._read_offset


def committed_offsets(consumer: Any) -> Mapping[Any, int | None]:
    """Faust's consumer's record of the offset last committed per topic partition
    (``_committed_offset``)."""
    return consumer._committed_offset


async def commit_offsets(consumer: Any, offsets: Mapping[Any, int]) -> bool:
    """Commit ``offsets`` (topic partition -> next offset to read) through Faust's consumer
    (``_commit_offsets``, which also keeps Faust's own record of committed offsets in step)."""
    return bool(await consumer._commit_offsets(dict(offsets)))


def enable_passive(stream: Any) -> None:
    """Drain ``stream`` in the background (``Stream._enable_passive`` over an iterator of
    its channel), as ``Stream.take_events`` does, so its processors see every event."""
    stream._enable_passive(aiter(stream.channel))


def stop_events(service: Any) -> tuple[Any, Any]:
    """A ``mode`` service's stopped and crashed events (``_stopped``, ``_crashed``)."""
    return service._stopped, service._crashed


def wait_results(done: list[Any], results: list[Any]) -> Any:
    """What ``mode``'s ``Service.wait_first`` returns when ``done`` finished first."""
    return WaitResults(done, results, False)


def replace_wait_first(service: Any, wait_first: Callable[..., Any]) -> None:
    """Make ``wait_first`` the service's ``wait_first`` (on this instance only) and mark it."""
    service.wait_first = wait_first
    setattr(service, _MARKER, True)


def has_replaced_wait_first(service: Any) -> bool:
    """Whether :func:`replace_wait_first` was applied to ``service``."""
    return bool(getattr(service, _MARKER, False))


def disable_spinner(worker: Any) -> None:
    """Turn off Faust's terminal spinner of ``worker`` (``Worker.spinner = None``)."""
    worker.spinner = None
