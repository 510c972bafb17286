"""The hostile-input corpus: every hostile-input case, as data, replayed through both shells by
``tests/test_fuzz.py`` and (the single-record dead letters marked ``poison``) woven into a
trace by ``tests/test_poison_pills.py``. One list; add a case here, not in a test.

A :class:`Case` is a few input lines (text, or bytes where the case is about the bytes: a BOM,
invalid UTF-8), the last of which is the hostile one, and what must become of it:

- ``field`` / ``reason``: it is dead-lettered, the dead letter naming ``field`` and its reason
  containing ``reason``;
- ``field = None``: it is accepted (an estimate), possibly flagged (``flag`` in its flags);
- ``after``: ordinary windows sent after it, each of which must still be processed (and its
  system still solved);
- ``field = ANY``: the contract leaves it open -- only the invariant is checked: processed
  or dead-lettered with a reason, every output finite, nothing raised.

:data:`CONFIGS` are configuration files (TOML) that must be refused naming the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ANY", "CONFIGS", "CORPUS", "Case", "ConfigCase", "POISON", "window"]

#: the outcome is open (module docstring)
ANY = "*"

_BASE_END = 1_795_687_205.0        # 2026-11-25T10:00:05Z


def window(**changes: Any) -> str:
    """A valid window of tier ``front`` (``system`` given in ``changes``), as JSON text."""
    rec: dict[str, Any] = {"tier": "front", "end": "2026-11-20T10:00:05Z", "window_s": 5.0,
                           "utilization": 0.4, "cores": 1, "completions": {"home": 120},
                           "response_time_s": {"home": 0.01}, "users": 10}
    rec.update(changes)
    return json.dumps(rec)


def _series(system: str, n: int, start: float = _BASE_END, **changes: Any) -> list[str]:
    """``n`` consecutive valid 5-s windows of ``system``."""
    return [window(system=system, end=start + 5.0 * i,
                   utilization=0.3 + 0.02 * (i % 7),
                   completions={"home": 100 + 3 * (i % 5), "buy": 10 + i % 3}, **changes)
            for i in range(n)]


@dataclass(frozen=True)
class Case:
    """Input lines (the last one is the hostile one) and its expected fate (module
    docstring)."""

    name: str
    lines: tuple[str | bytes, ...]
    field: str | None
    reason: str = ""
    #: a single record dead-lettered on its own: also a poison pill of tests/test_poison_pills
    poison: bool = False
    #: an accepted record's flag
    flag: str = ""
    #: ordinary windows after the hostile one: each must still be processed
    after: tuple[str, ...] = ()

    @property
    def hostile(self) -> str | bytes:
        return self.lines[-1]


def _one(name: str, text: str | bytes, field: str | None, reason: str = "",
         poison: bool = False, flag: str = "") -> Case:
    return Case(name, (text,), field, reason, poison, flag)


_many_classes = {f"c{i:05d}": 1 for i in range(10_000)}

CORPUS: list[Case] = [
    # -- names ------------------------------------------------------------------------------
    _one("lone surrogate in system", window(system="a\ud800"), "system", "not valid Unicode",
         poison=True),
    _one("lone surrogate in tier", window(system="p-tier", tier="db\udfff"), "tier",
         "not valid Unicode", poison=True),
    _one("lone surrogate in class", window(system="p-class", completions={"h\ud800": 3}),
         "completions", "not valid Unicode", poison=True),
    # -- numbers ----------------------------------------------------------------------------
    _one("cores beyond 4096 on a first window", window(system="p-cores", cores=1_000_001),
         "cores", "at most 4096", poison=True),
    _one("users 2**63", window(system="p-users", users=2**63), "users",
         "at most 1,000,000,000", poison=True),
    _one("users 10**30", window(system="p-users2", users=10**30), "users", "at most",
         poison=True),
    # -- line breaks and backslashes in names -----------------------------------------------
    _one("newline in a class name", window(system="p-nl", completions={"a\nb": 3}),
         "completions", "control character", poison=True),
    _one("newline in system", window(system="sh\nop"), "system", "control character",
         poison=True),
    _one("carriage return in tier", window(system="p-cr", tier="db\r"), "tier",
         "control character", poison=True),
    _one("class ending in a backslash", window(system="p-bs", completions={"home\\": 3}),
         "completions", "backslash", poison=True),
    # -- size -------------------------------------------------------------------------------
    _one("a 900 KB malformed line", '{"system": "' + "x" * 900_000, "record", "malformed JSON",
         poison=True),
    _one("a 900 KB name", window(system="y" * 900_000), "system", "at most 200", poison=True),
    _one("deeply nested JSON", '{"a": ' * 100_000, "record", "JSON", poison=True),
    _one("utilization beyond the tolerance", window(system="p-u", utilization=1.05),
         "utilization", "tolerance 0.02", poison=True),
    # -- the remaining hostile-input cases -------------------------------------------------------
    _one("a window with 10,000 classes", window(system="p-10k", completions=_many_classes),
         "completions", "class limit"),
    _one("users 1e18", window(system="p-1e18", users=1e18), "users", "at most"),
    Case("users 1e18 after ordinary windows",
         tuple(_series("p-1e18b", 30)) + (window(system="p-1e18b", end=_BASE_END + 150.0,
                                                 users=1e18),), "users", "at most",
         after=tuple(_series("p-1e18b", 60, start=_BASE_END + 155.0))),
    _one("a backslash inside a name", window(system="p\\bs", completions={"a\\b": 3}), None),
    _one("a control character (DEL) in a name", window(system="p-del\x7f"), "system",
         "control character"),
    _one("a C1 control character in a class", window(system="p-c1",
                                                      completions={"x\x85y": 1}),
         "completions", "control character"),
    _one("utilization a hair above 1", window(system="p-clamped", utilization=1.013), None,
         flag="utilization 1.013 clamped to 1 (within tolerance 0.02)"),
    _one("NaN utilization", window(system="p-nan", utilization=float("nan")), "utilization",
         "finite"),
    _one("infinite window_s", window(system="p-inf", window_s=float("inf")), "window_s",
         "finite"),
    _one("integer text beyond Python's digit limit",
         '{"system": "p-digits", "users": ' + "9" * 5000 + "}", "record", "JSON"),
    _one("end in milliseconds", window(system="p-ms", end=1.7e12), "end", "milliseconds"),
    _one("a UTF-8 byte-order mark before a record", b"\xef\xbb\xbf" + window(
        system="p-bom").encode(), None),
    _one("invalid UTF-8", b'{"system": "p-\xff\xfe", "tier": "front"}', "record",
         "not UTF-8"),
    _one("a JSON array, not an object", "[1, 2, 3]", "record", "JSON object"),
    _one("completions as a list", window(system="p-list", completions=[1, 2]), "completions",
         "object"),
    # -- valid records implausible against their system's own windows (item 1;
    #    streams/core/plausibility.py) ----------------------------------------------------------
    Case("end in 2100 among the system's windows",
         tuple(_series("p-2100", 30)) + (window(system="p-2100", end=4_102_444_800.0),),
         "end", "past the system's newest window end",
         after=tuple(_series("p-2100", 60, start=_BASE_END + 150.0))),
    Case("utilization 0 with 4e9 completions",
         tuple(_series("p-4e9", 30)) + (window(system="p-4e9", end=_BASE_END + 150.0,
                                               utilization=0.0,
                                               completions={"home": 4e9}),), "completions",
         "busy core-seconds", after=tuple(_series("p-4e9", 60, start=_BASE_END + 155.0))),
    Case("a window overlapping another by half",
         tuple(_series("p-overlap", 10)) + (window(system="p-overlap",
                                                   end=_BASE_END + 5.0 * 9 + 2.5),), "end",
         "overlaps the window ending at",
         after=tuple(_series("p-overlap", 10, start=_BASE_END + 50.0))),
    Case("users jumping from 10 to 10**9 after ordinary windows",
         tuple(_series("p-jump", 30)) + (window(system="p-jump", end=_BASE_END + 150.0,
                                                users=10**9),), "users",
         "times the tier's recent median",
         after=tuple(_series("p-jump", 60, start=_BASE_END + 155.0))),
    Case("completions jumping 10,000-fold at a busy tier",
         tuple(_series("p-rate", 30)) + (window(system="p-rate", end=_BASE_END + 150.0,
                                                completions={"home": 1_000_000}),),
         "completions", "completion rate",
         after=tuple(_series("p-rate", 60, start=_BASE_END + 155.0))),
    Case("the same window end twice with other content",
         tuple(_series("p-dup", 10)) + (_series("p-dup", 10, users=11)[-1],),
         "end", "duplicate"),
    Case("a window older than the kept ends",
         tuple(_series("p-late", 300)) + (window(system="p-late", end=_BASE_END - 3600.0),),
         "end", "too late"),
]

#: the single-record dead letters woven into tests/test_poison_pills.py's trace:
#: name -> (text, field, reason)
POISON = {c.name: (c.hostile, c.field, c.reason) for c in CORPUS if c.poison}


@dataclass(frozen=True)
class ConfigCase:
    """A configuration file that must be refused: the error names ``key``."""

    name: str
    toml: str
    key: str


CONFIGS: list[ConfigCase] = [
    ConfigCase("solve_interval_s = 1e-300", "[defaults]\nsolve_interval_s = 1e-300\n",
               "defaults.solve_interval_s"),
    ConfigCase("horizon_s = 1e308", "[defaults]\nhorizon_s = 1e308\n", "defaults.horizon_s"),
    ConfigCase("history = 10**12", f"[defaults]\nhistory = {10**12}\n", "defaults.history"),
    ConfigCase("solve_interval_s = 1e308", "[defaults]\nsolve_interval_s = 1e308\n",
               "defaults.solve_interval_s"),
    ConfigCase("a system's solve_interval_s = nan",
               "[systems.shop]\nsolve_interval_s = nan\n", "systems.shop.solve_interval_s"),
    ConfigCase("horizon_s = inf", "[defaults]\nhorizon_s = inf\n", "defaults.horizon_s"),
    ConfigCase("max_classes = 10**9", f"[limits]\nmax_classes = {10**9}\n",
               "limits.max_classes"),
    ConfigCase("utilization_tolerance = -0.5", "[defaults]\nutilization_tolerance = -0.5\n",
               "defaults.utilization_tolerance"),
]
