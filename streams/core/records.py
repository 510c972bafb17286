"""The input window record (the binding contract of docs/pipeline.md) and its validation.

One record is one monitoring window of one tier::

    {"system": "shop", "tier": "db", "end": "2026-11-20T10:00:05Z", "window_s": 5.0,
     "utilization": 0.63, "cores": 1,
     "completions": {"home": 120, "best_sellers": 14},
     "response_time_s": {"home": 0.012},
     "users": 100,
     "response_time_quantiles_s": {"home": {"p95": 0.031, "p99": 0.12}}}

:func:`parse_window` turns raw bytes, text or a mapping into a :class:`Window` or raises
:class:`InvalidWindow` naming the field, the offending value and the reason. Unknown extra
fields are ignored (producers may add their own). ``end`` is ISO-8601 (``Z`` or an offset) or
epoch seconds; it is kept as epoch seconds.

Two paths, one contract: a record is first decoded and range-checked by ``msgspec`` against
:class:`_Wire` (a few microseconds, no intermediate dict); anything that path does not accept
outright goes through the field-by-field validator, which is the authority: it accepts what the
contract allows (whole floats as counts, ...) and names the field, the value and the reason of
every rejection. The fast path accepts a subset of what the validator accepts and builds the
same :class:`Window` (property-tested in ``tests/test_records.py``).

Utilization a little above 1 is rounding or scrape jitter (the busy counter and the window's end
are read at slightly different moments), not a broken monitor: up to ``1 + tolerance``
(:data:`UTILIZATION_TOLERANCE`, 0.02 by default; ``[defaults] utilization_tolerance`` in the
configuration) it is clamped to 1 and the window carries a flag (:attr:`Window.flags`, e.g.
``"utilization 1.013 clamped to 1 (within tolerance 0.02)"``), which the pipeline copies into the
window's estimate record; beyond it the window is rejected, the reason naming the tolerance.
Negative utilization is a negative field and rejected, except rounding residue within
:data:`UTILIZATION_ROUNDING` (``-1e-12``), which is clamped to 0 and flagged the same way. Only
windows outside [0, 1] leave the fast path, so the clamping costs the usual window nothing.

A window without ``cores`` is one core, the contract's default, and carries
:data:`CORES_ASSUMED` in its flags (both paths): the pipeline keeps it out of the estimate record
and marks the tier, whose predictions then say the model assumed one core.

``response_time_quantiles_s`` (optional) holds per class the measured quantiles of the
end-to-end response time, at the entry tier (from a latency histogram:
:mod:`estimators.histogram`): each quantile named ``p50`` ... ``p99.9`` (``pNN``) or given as
its level within (0, 1), each value finite and ``>= 0``, and not falling as the level rises;
the keys are kept by their canonical names (``"0.95"`` as ``p95``). Anything else is an
``InvalidWindow`` naming the class and the quantile (``response_time_quantiles_s.buy.p95``).
A record with the field always takes the validator's path.

``pools`` (optional) holds per thread or connection pool its measured occupancy over the
window -- ``size``, mean ``busy`` tokens, mean ``waiting`` requests, ``acquire_s``
(:mod:`streams.core.pool_occupancy`, which states the rules); a ``busy`` a hair over ``size``
is clamped and flagged like a utilization, anything else out of range is an ``InvalidWindow``
naming ``pools.<name>.<key>``. A record with the field always takes the validator's path.

Names (system, tier, request classes) must be printable: no control characters (a ``"\\n"`` would
split an InfluxDB line-protocol line), no lone surrogates (JSON's ``"\\ud800"``: not UTF-8, which
every sink writes), and no trailing backslash (line protocol cannot store one: it escapes the
separator after it). ``cores`` is at most :data:`MAX_CORES` and ``users`` at most
:data:`MAX_USERS`, far beyond any real tier, so that every sink (SQLite and InfluxDB integers
are 64-bit) and every estimator can take them.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import math
import re
import sys
from typing import Annotated, Any, Mapping, Optional, Union

import msgspec
import numpy as np

from estimators.histogram import HistogramError, check_quantiles
from streams.core.pool_occupancy import PoolFieldError, PoolOccupancy, parse_occupancy

__all__ = ["Window", "InvalidWindow", "parse_window", "parse_end", "format_time", "clean",
           "MAX_CORES", "MAX_USERS", "UTILIZATION_TOLERANCE", "MAX_UTILIZATION_TOLERANCE",
           "UTILIZATION_ROUNDING", "valid_name", "content_digest", "CORES_ASSUMED"]

#: longest accepted system, tier or class name
MAX_NAME = 200
#: largest accepted epoch seconds (year 5138): larger values are milliseconds or microseconds
MAX_END = 1e11
#: largest accepted window, seconds (one day)
MAX_WINDOW_S = 86_400.0
#: per-class throughput bounds (completions per second, when not 0): one request in 30 years,
#: a billion per second -- the demand estimators' working range
MIN_RATE, MAX_RATE = 1e-9, 1e9
#: largest accepted mean response time, seconds (30 years)
MAX_RESPONSE_TIME_S = 1e9
#: largest accepted ``cores`` (servers of a tier): beyond the largest machines, and within what
#: the demand estimators and the multi-server models take
MAX_CORES = 4096
#: largest accepted ``users``: a billion sessions; SQLite and InfluxDB integers are 64-bit
MAX_USERS = 10 ** 9
#: default utilization tolerance: values in ``(1, 1 + tolerance]`` are clamped to 1 and flagged
#: (``[defaults] utilization_tolerance``)
UTILIZATION_TOLERANCE = 0.02
#: largest tolerance the configuration accepts
MAX_UTILIZATION_TOLERANCE = 0.1
#: rounding residue: a utilization within this of [0, 1] (``-1e-12``, ``1 + 1e-12``) is clamped
#: and flagged whatever the tolerance
UTILIZATION_ROUNDING = 1e-9


class InvalidWindow(ValueError):
    """A window record that breaks the input contract: ``field``, ``value`` and ``reason``."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}: {reason} (got {short_repr(value)})")


def short_repr(value: Any, limit: int = 120) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages (a value whose ``repr``
    cannot be built is named by its type)."""
    try:
        text = repr(value)
    except ValueError:              # an int beyond sys.get_int_max_str_digits()
        text = f"<{type(value).__name__} too long to show>"
    except RecursionError:          # a structure nested deeper than the stack
        text = f"<{type(value).__name__} nested too deeply to show>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


#: the flag of a window without ``cores``: the contract's default, one core, is assumed (the
#: model's capacity scales with it, so the prediction says so too)
CORES_ASSUMED = "cores not given: 1 core assumed (the contract's default)"


class Window(msgspec.Struct, frozen=True, gc=False):
    """One validated monitoring window of one tier (``U_k``, ``n_k`` of Mi et al. (2008), Fig. 2)."""

    system: str
    tier: str
    end: float                      # epoch seconds
    window_s: float                 # T
    utilization: float              # U_k, busy fraction averaged over cores
    cores: int
    completions: dict[str, float]   # per class, requests that left the tier in the window
    response_time_s: dict[str, float] = msgspec.field(default_factory=dict)
    users: int | None = None
    #: caveats of an accepted window (a utilization clamped into [0, 1]; no cores); not part of
    #: the contract's record (:meth:`to_record`); a clamp is copied into the estimate record
    flags: tuple[str, ...] = ()
    #: per class, measured end-to-end quantiles ``{"p95": seconds}`` (module docstring)
    response_time_quantiles_s: dict[str, dict[str, float]] = msgspec.field(
        default_factory=dict)
    #: per pool, its measured occupancy (module docstring)
    pools: dict[str, PoolOccupancy] = msgspec.field(default_factory=dict)

    @property
    def total_completions(self) -> float:
        """``n_k``: requests of all classes completed in the window."""
        return float(sum(self.completions.values()))

    @property
    def busy_time(self) -> float:
        """``B_k = U_k T``, busy seconds of the (average) core in the window."""
        return self.utilization * self.window_s

    def to_record(self) -> dict[str, Any]:
        """The contract's JSON form (``end`` as epoch seconds)."""
        out: dict[str, Any] = {
            "system": self.system, "tier": self.tier, "end": self.end,
            "window_s": self.window_s, "utilization": self.utilization, "cores": self.cores,
            "completions": dict(self.completions),
        }
        if self.response_time_s:
            out["response_time_s"] = dict(self.response_time_s)
        if self.users is not None:
            out["users"] = self.users
        if self.response_time_quantiles_s:
            out["response_time_quantiles_s"] = {
                c: dict(q) for c, q in self.response_time_quantiles_s.items()}
        if self.pools:
            out["pools"] = {name: p.to_record() for name, p in self.pools.items()}
        return out


#: a window's fields as MessagePack with every map's keys sorted (:func:`content_digest`)
_canonical = msgspec.msgpack.Encoder(order="sorted").encode


def content_digest(w: Window) -> int:
    """A 56-bit digest of everything ``w`` says (every field, class maps in sorted order), the
    same in every process and on every machine (BLAKE2b, not Python's salted ``hash``). Two
    windows with the same digest are taken to be the same measurement: a window read again
    (after a worker's crash) or sent again unchanged is a *replay*, one with the same ``end``
    and another digest a conflicting duplicate (:meth:`streams.core.tier.TierState.admit`).
    Two different windows of one tier share a digest with probability 2^-56."""
    # a window without measured quantiles or pools digests as before those fields existed (a
    # state saved then still tells its replays)
    if w.pools:
        body = _canonical(w)
    elif w.response_time_quantiles_s:
        body = _canonical(_Quantiled(*msgspec.structs.astuple(w)[:-1]))
    else:
        body = _canonical(_Digested(*msgspec.structs.astuple(w)[:-2]))
    return int.from_bytes(hashlib.blake2b(body, digest_size=7).digest(), "big")


class _Digested(msgspec.Struct, frozen=True, gc=False):
    """:class:`Window` without its measured quantiles (:func:`content_digest`)."""

    system: str
    tier: str
    end: float
    window_s: float
    utilization: float
    cores: int
    completions: dict[str, float]
    response_time_s: dict[str, float]
    users: int | None
    flags: tuple[str, ...]


class _Quantiled(_Digested, frozen=True, gc=False):
    """:class:`Window` without its pools (:func:`content_digest`)."""

    response_time_quantiles_s: dict[str, dict[str, float]]


def parse_window(raw: bytes | str | Mapping[str, Any],
                 utilization_tolerance: float = UTILIZATION_TOLERANCE) -> Window:
    """Validate one input record; :class:`InvalidWindow` names the field, value and reason.

    ``utilization_tolerance``: a utilization in ``(1, 1 + tolerance]`` is clamped to 1 and
    flagged (module docstring)."""
    try:
        window = _fast(raw)
    except (msgspec.MsgspecError, InvalidWindow, TypeError, ValueError, OverflowError,
            RecursionError):
        window = None
    return window if window is not None else _validate(raw, utilization_tolerance)


def _validate(raw: bytes | str | Mapping[str, Any],
              utilization_tolerance: float = UTILIZATION_TOLERANCE) -> Window:
    """The field-by-field validator (the authority on what is accepted and why not)."""
    data = _decode(raw)
    system = _name(data, "system")
    tier = _name(data, "tier")
    end = parse_end(_required(data, "end"))
    window_s = _window_s(_required(data, "window_s"))
    utilization, flag = _utilization(_required(data, "utilization"), utilization_tolerance)
    pools, pool_flags = _pools(data.get("pools"), utilization_tolerance)
    window = Window(
        system=system,
        tier=tier,
        end=end,
        window_s=window_s,
        utilization=utilization,
        cores=_cores(data.get("cores", 1)),
        completions=_per_class(_required(data, "completions"), "completions", required=True),
        response_time_s=_per_class(data.get("response_time_s"), "response_time_s",
                                   upper=MAX_RESPONSE_TIME_S),
        users=_users(data.get("users")),
        flags=((flag,) if flag else ()) + (() if "cores" in data else (CORES_ASSUMED,))
        + pool_flags,
        response_time_quantiles_s=_quantiles(data.get("response_time_quantiles_s")),
        pools=pools,
    )
    _check_rates(window.completions, window.window_s)
    return window


def _quantiles(value: Any) -> dict[str, dict[str, float]]:
    """``response_time_quantiles_s``: per class its quantiles (module docstring)."""
    name = "response_time_quantiles_s"
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidWindow(name, value, "must be an object of class -> {quantile: seconds}")
    out = {}
    for cls, q in value.items():
        if not isinstance(cls, str) or not cls or len(cls) > MAX_NAME \
                or _name_problem(cls) is not None:
            raise InvalidWindow(name, cls, f"class names must be valid names of at most "
                                           f"{MAX_NAME} characters")
        try:
            out[cls] = check_quantiles(q, f"{name}.{cls}")
        except HistogramError as err:
            raise InvalidWindow(err.field, err.value, err.reason) from None
    return out


def _pools(value: Any, tolerance: float) -> tuple[dict[str, PoolOccupancy], tuple[str, ...]]:
    """``pools``: per pool its occupancy, and the flags of values clamped (module
    docstring)."""
    if value is None:
        return {}, ()
    if not isinstance(value, Mapping):
        raise InvalidWindow("pools", value, "must be an object of pool -> {size, busy, "
                                            "waiting, acquire_s}")
    out, flags = {}, []
    for name, occupancy in value.items():
        if not isinstance(name, str) or not name.strip() or _name_problem(name) is not None:
            raise InvalidWindow("pools", name, f"pool names must be valid names of at most "
                                               f"{MAX_NAME} characters")
        try:
            out[name], flag = parse_occupancy(occupancy, f"pools.{name}", tolerance)
        except PoolFieldError as err:
            raise InvalidWindow(err.field, err.value, err.reason) from None
        if flag:
            flags.append(flag)
    return out, tuple(flags)


def _check_rates(completions: Mapping[str, float], window_s: float) -> None:
    """Each class's throughput ``n / T`` is 0 or within ``[MIN_RATE, MAX_RATE]`` per second:
    beyond, it cannot come from monitoring, and the demand estimators' arithmetic (``U / X``,
    ``x_0^2``) would leave the float range."""
    for cls, n in completions.items():
        rate = n / window_s
        if rate and not MIN_RATE <= rate <= MAX_RATE:
            raise InvalidWindow(f"completions.{cls}", n,
                                f"implies {rate:.3g} completions per second over window_s = "
                                f"{window_s:g}; must be 0 or within [{MIN_RATE:g}, "
                                f"{MAX_RATE:g}] per second")


def _decode(raw: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(raw, Mapping):
        return raw
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            data = bytes(raw)       # the value: the bytes around the first one that is not UTF-8
            raise InvalidWindow("record", data[max(exc.start - 30, 0):exc.start + 30],
                                f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not isinstance(raw, str):
        raise InvalidWindow("record", raw, "expected a JSON object")
    if raw.startswith("\ufeff"):       # a UTF-8 byte-order mark (an editor's, a file's first line)
        raw = raw[1:]
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidWindow("record", raw, f"malformed JSON: {exc.msg} at position {exc.pos}") \
            from None
    except (ValueError, RecursionError) as exc:
        # integer text longer than sys.get_int_max_str_digits(); nesting deeper than the stack
        raise InvalidWindow("record", raw, f"unreadable JSON: {exc}"[:200]) from None
    if not isinstance(data, dict):
        raise InvalidWindow("record", data, "expected a JSON object")
    return data


def _required(data: Mapping[str, Any], name: str) -> Any:
    if name not in data or data[name] is None:
        raise InvalidWindow(name, None, "missing (required field)")
    return data[name]


def _name(data: Mapping[str, Any], name: str) -> str:
    value = _required(data, name)
    if type(value) is str and len(value) <= MAX_NAME and _known_name(value):
        return value
    if not isinstance(value, str) or not value.strip():
        raise InvalidWindow(name, value, "must be a non-empty string")
    problem = _name_problem(value)
    if problem:
        raise InvalidWindow(name, value, problem)
    return value


#: control characters (Unicode category Cc: C0, DEL, C1); a name must have none
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _name_problem(value: str) -> str | None:
    """Why ``value`` cannot be a system, tier or class name (``None``: it can)."""
    if len(value) > MAX_NAME:
        return f"must be at most {MAX_NAME} printable characters"
    if not _encodable(value):
        return "not valid Unicode: must not contain lone surrogates (it cannot be written as UTF-8)"
    control = _CONTROL.search(value)
    if control:
        return (f"must be at most {MAX_NAME} printable characters: control character "
                f"{control.group()!r} at position {control.start()}")
    if value.endswith("\\"):
        return "must not end with a backslash (InfluxDB line protocol cannot store one)"
    return None


def valid_name(value: Any) -> bool:
    """``value`` can be a request-class name: non-empty, at most :data:`MAX_NAME` characters,
    valid Unicode, no control character, no trailing backslash (a system or tier name must
    also not be blank)."""
    return type(value) is str and len(value) <= MAX_NAME and _known_class_name(value)


def _encodable(text: str) -> bool:
    """``text`` can be written as UTF-8 (JSON's ``"\\ud800"`` escapes decode to lone
    surrogates, which no UTF-8 sink -- SQLite, line protocol, Kafka -- accepts)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, ``None`` if it is not a (finite, float-sized) number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:           # an int beyond the float range
        return None
    return v if math.isfinite(v) else None


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidWindow(name, value, "must be a number")
    v = _finite(value)
    if v is None:
        raise InvalidWindow(name, value, "must be finite (NaN and infinity are not allowed, "
                                         "nor numbers beyond the float range)")
    return v


def parse_end(value: Any) -> float:
    """``end`` as epoch seconds, from epoch seconds or an ISO-8601 string with a zone."""
    if isinstance(value, str):
        text = value.strip()
        try:
            moment = _dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z")
                                                else text)
        except ValueError:
            raise InvalidWindow("end", value, "not an ISO-8601 time or epoch seconds") from None
        if moment.tzinfo is None:
            raise InvalidWindow("end", value, "ISO-8601 time needs a zone ('Z' or an offset)")
        if moment.timestamp() < 0:
            raise InvalidWindow("end", value, "must not be before 1970-01-01T00:00:00Z")
        return moment.timestamp()
    v = _number(value, "end")
    if v < 0:
        raise InvalidWindow("end", value, "epoch seconds must be >= 0")
    if v > MAX_END:
        raise InvalidWindow("end", value, "epoch seconds expected; this looks like "
                            "milliseconds or microseconds (after the year 5000)")
    return v


def format_time(epoch_s: float) -> str:
    """Epoch seconds as ISO-8601 UTC with ``Z`` (millisecond precision)."""
    moment = _dt.datetime.fromtimestamp(epoch_s, tz=_dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _window_s(value: Any) -> float:
    v = _number(value, "window_s")
    if not 0.0 < v <= MAX_WINDOW_S:
        raise InvalidWindow("window_s", value, f"must be > 0 and <= {MAX_WINDOW_S:g} seconds")
    return v


def _utilization(value: Any, tolerance: float = UTILIZATION_TOLERANCE) -> tuple[float,
                                                                                 str | None]:
    """``U_k`` and the flag of a value clamped into [0, 1] (``None``: taken as it is)."""
    v = _number(value, "utilization")
    if 0.0 <= v <= 1.0:
        return v, None
    if v > 1.0:
        if v <= 1.0 + max(tolerance, UTILIZATION_ROUNDING):
            within = "rounding" if v <= 1.0 + UTILIZATION_ROUNDING else f"tolerance {tolerance:g}"
            return 1.0, f"utilization {v!r} clamped to 1 (within {within})"
        raise InvalidWindow("utilization", value,
                            f"must be within [0, 1] (busy fraction averaged over cores); above 1 "
                            f"only by up to the tolerance {tolerance:g} (utilization_tolerance), "
                            f"for rounding and scrape jitter")
    if v >= -UTILIZATION_ROUNDING:
        return 0.0, f"utilization {v!r} clamped to 0 (within rounding)"
    raise InvalidWindow("utilization", value,
                        "must be within [0, 1] (busy fraction averaged over cores)")


def _whole(field: str, value: Any, least: int, most: int, most_text: str) -> int:
    """``value`` as a whole number within ``[least, most]`` (``most_text``: how the bound
    reads in the error)."""
    v = _finite(value)
    if v is None or v != int(v) or v < least:
        raise InvalidWindow(field, value, f"must be a whole number >= {least}")
    if v > most:
        raise InvalidWindow(field, value, f"must be at most {most_text}")
    return int(value)


def _cores(value: Any) -> int:
    return _whole("cores", value, 1, MAX_CORES, f"{MAX_CORES}")


def _users(value: Any) -> int | None:
    if value is None:
        return None
    return _whole("users", value, 0, MAX_USERS, f"{MAX_USERS:,} (10**9)")


_FLOAT_MAX = sys.float_info.max


# The two caches below are called only with names of at most MAX_NAME characters: a stream of
# long unique names must not fill them with megabytes each.
@functools.lru_cache(maxsize=4096)
def _known_name(value: str) -> bool:
    """A valid system or tier name (checked once per name)."""
    return bool(value.strip()) and _name_problem(value) is None


@functools.lru_cache(maxsize=4096)
def _known_class_name(cls: str) -> bool:
    """A valid class name (checked once per name: streams repeat the same few classes)."""
    return len(cls) > 0 and _name_problem(cls) is None


def _per_class(value: Any, name: str, required: bool = False,
               upper: float = _FLOAT_MAX) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidWindow(name, value, "must be an object of class -> number")
    if required and not value:
        raise InvalidWindow(name, value, "must list at least one request class")
    out: dict[str, float] = {}
    for cls, v in value.items():
        kind = type(v)           # fast path: a plain finite non-negative number, a known name
        if ((kind is float and 0.0 <= v <= upper) or (kind is int and 0 <= v <= upper)) \
                and type(cls) is str and len(cls) <= MAX_NAME and _known_class_name(cls):
            out[cls] = float(v)
            continue
        if not isinstance(cls, str) or not cls or len(cls) > MAX_NAME:
            raise InvalidWindow(name, cls, f"class names must be non-empty strings of at most "
                                           f"{MAX_NAME} characters")
        problem = _name_problem(cls)
        if problem:
            raise InvalidWindow(name, cls, f"class name {problem}")
        number = _number(v, f"{name}.{cls}")
        if number < 0:
            raise InvalidWindow(f"{name}.{cls}", v, "must be >= 0")
        if number > upper:
            raise InvalidWindow(f"{name}.{cls}", v, f"must be <= {upper:g}")
        out[cls] = number
    return out


#: a count or a time: a finite number >= 0 (JSON has no NaN; ``1e999`` decodes to infinity)
_Amount = Annotated[float, msgspec.Meta(ge=0.0, le=_FLOAT_MAX)]


class _Wire(msgspec.Struct, gc=False):
    """The contract's shape with the checks ``msgspec`` makes while decoding (the fast path)."""

    system: str
    tier: str
    end: Union[float, str]
    window_s: Annotated[float, msgspec.Meta(gt=0.0, le=MAX_WINDOW_S)]
    utilization: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    completions: Annotated[dict[str, _Amount], msgspec.Meta(min_length=1)]
    #: 0: not in the record (msgspec does not check a default): 1 core assumed, flagged
    cores: Annotated[int, msgspec.Meta(ge=1, le=MAX_CORES)] = 0
    response_time_s: Optional[dict[str, Annotated[float, msgspec.Meta(
        ge=0.0, le=MAX_RESPONSE_TIME_S)]]] = None
    users: Optional[Annotated[int, msgspec.Meta(ge=0, le=MAX_USERS)]] = None
    #: present: the validator reads it (the fast path does not check it)
    response_time_quantiles_s: Any = None
    pools: Any = None


_WIRE = msgspec.json.Decoder(_Wire)


class _NameCache:
    """Names (system, tier, class) already found valid: streams repeat the same few, so a
    record's names are usually checked by one set lookup each. Bounded: cleared when full."""

    LIMIT = 100_000

    def __init__(self) -> None:
        self.valid: set[str] = set()

    def covers(self, names: Any) -> bool:
        """Every name in ``names`` is valid (checking and remembering the new ones)."""
        valid = self.valid
        if valid.issuperset(names):
            return True
        for name in names:
            if name not in valid:
                if len(name) > MAX_NAME or not _known_class_name(name):
                    return False
                if len(valid) >= self.LIMIT:
                    valid.clear()
                valid.add(name)
        return True


_CLASS_NAMES = _NameCache()


def _fast(raw: bytes | str | Mapping[str, Any]) -> Window | None:
    """:class:`Window` from a record the fast path accepts outright, else ``None`` (or an
    exception): the caller then runs the validator."""
    if type(raw) is dict:
        wire = msgspec.convert(raw, _Wire)
    elif isinstance(raw, (bytes, str)):
        wire = _WIRE.decode(raw)
    else:
        return None
    rt = wire.response_time_s
    if wire.response_time_quantiles_s is not None or wire.pools is not None:
        return None
    if not (len(wire.system) <= MAX_NAME and len(wire.tier) <= MAX_NAME
            and _known_name(wire.system) and _known_name(wire.tier)
            and _CLASS_NAMES.covers(wire.completions)
            and (rt is None or _CLASS_NAMES.covers(rt))):
        return None
    end = wire.end
    if not (type(end) is float and 0.0 <= end <= MAX_END):
        end = parse_end(end)
    if not _rates_within(wire.completions, wire.window_s):
        return None
    if wire.cores:
        return Window(wire.system, wire.tier, end, wire.window_s, wire.utilization, wire.cores,
                      wire.completions, rt or {}, wire.users)
    return Window(wire.system, wire.tier, end, wire.window_s, wire.utilization, 1,
                  wire.completions, rt or {}, wire.users, (CORES_ASSUMED,))


def _rates_within(completions: dict[str, float], window_s: float) -> bool:
    """:func:`_check_rates` passes (two reductions when no class is at 0)."""
    counts = completions.values()
    low, high = min(counts), max(counts)
    if high > MAX_RATE * window_s * (1 - 1e-12):
        return False
    if low > 0:
        return low >= MIN_RATE * window_s * (1 + 1e-12)
    try:
        _check_rates(completions, window_s)
    except InvalidWindow:
        return False
    return True


def clean(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become ``None``, numpy scalars plain numbers."""
    kind = type(value)
    if kind is float:
        return value if value - value == 0.0 else None       # inf - inf and nan are nan
    if kind is dict:
        return _clean_dict(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, dict):
        return _clean_dict(value)
    return value


def _clean_dict(d: dict[Any, Any]) -> dict[Any, Any]:
    """:func:`clean` of a dict, its plain leaves handled inline (an output record has a few
    hundred)."""
    out = {}
    for k, v in d.items():
        kind = type(v)
        if kind is float:
            out[k] = v if v - v == 0.0 else None
        elif kind is np.float64:           # as a float: inf - inf warns on a numpy scalar
            f = float(v)
            out[k] = f if f - f == 0.0 else None
        elif kind is str or kind is int or kind is bool or v is None:
            out[k] = v
        elif kind is dict:
            out[k] = _clean_dict(v)
        else:
            out[k] = clean(v)
    return out
