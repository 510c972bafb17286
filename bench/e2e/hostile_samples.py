"""What each hostile sample record does to a run: every case of ``tests/fuzz_corpus/samples.py``
mixed midway into the demo shop's samples (600 s, 240 windows) through the embedded pipeline
(the core of ``perfcast run`` and of the worker), against the same run without it; then the
counter after a staleness marker, a duplicate sample, one future sample in a 200-system OTLP
stream, and ``[input] window_s = 0.001`` on 200 records. Prints one line per case: what was
raised, or the windows estimated, the dead letters and whether the estimates are those of the
run without the hostile record.

    python -m bench.e2e.hostile_samples                 # this checkout
    PYTHONPATH=OTHER python bench/e2e/hostile_samples.py    # another checkout's streams

Run time: about 30 s (measured); a checkout without the ``window_s`` minimum stops that case
after 60 s.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from format_samples import MAPPING_DICT, encode  # noqa: E402
from fuzz_corpus.samples import SAMPLE_CASES  # noqa: E402
from streams.cli.demo import DemoScenario, demo_config, demo_records  # noqa: E402
from streams.core.input_config import input_from_mapping  # noqa: E402
from streams.core.records import format_time  # noqa: E402
from streams.engine.pipeline import Pipeline  # noqa: E402
from streams.sources.sample_windows import SampleWindows  # noqa: E402

T0 = 1_764_000_000


def _fmt(fmt: str, **extra):
    settings = {"format": fmt, **MAPPING_DICT, **extra}
    return input_from_mapping({k: v for k, v in settings.items() if v is not None})


def _run(fmt: str, lines: list[str]):
    pipeline = Pipeline(replace(demo_config(), input=_fmt(fmt)))
    out = pipeline.process_many(lines)
    out.extend(pipeline.finish())
    return out


def _outcome(call) -> str:
    start = time.perf_counter()
    try:
        text = call()
    except BaseException as exc:          # noqa: BLE001 -- the outcome is what is measured
        text = f"raises {type(exc).__name__}: {str(exc)[:60]}"
    return f"{text} [{time.perf_counter() - start:.1f} s]"


def corpus() -> None:
    shop = demo_records(DemoScenario(duration_s=600, steady_s=240, step_s=30, step_users=10,
                                     users_start=20, users_end=60))
    base = {fmt: _run(fmt, encode(shop, fmt)) for fmt in {c.fmt for c in SAMPLE_CASES}}
    for case in SAMPLE_CASES:
        def one(case=case) -> str:
            lines = encode(shop, case.fmt)
            half = len(lines) // 2
            out = _run(case.fmt, lines[:half] + [case.record] + lines[half:])
            want = base[case.fmt].estimates
            same = [e.to_record() for e in out.estimates] == [e.to_record() for e in want]
            dead = out.deadletter
            size = max((len(json.dumps(d.to_record())) for d in dead), default=0)
            field = dead[0].field[-30:] if dead else "-"
            return (f"{len(out.estimates)}/{len(want)} windows estimated, {len(dead)} dead "
                    f"letters (field ...{field}, largest {size} B), same estimates: {same}")
        print(f"{case.name:42s} {_outcome(one)}")


def _adapter(t_ms: int, name: str, value: str, **labels: str) -> str:
    return json.dumps({"timestamp": format_time(t_ms / 1000), "value": value, "name": name,
                       "labels": {"__name__": name, "namespace": "s", "service": "web",
                                  **labels}})


def staleness() -> str:
    """A completions counter from 88,000 (+25 every 5 s) with a staleness marker at 54 s."""
    fmt = _fmt("prometheus-kafka-adapter", cores=1, time_sum=None, users=None,
               busy_seconds="app_busy", completions="app_served")
    lines = []
    for k in range(40):
        t = (T0 + 5 * k) * 1000 + 2500
        lines += [_adapter(t, "app_busy", repr(0.5 * k)),
                  _adapter(t, "app_served", repr(88_000.0 + 25 * k), uri="/a")]
        if k == 10:
            lines.append(_adapter((T0 + 54) * 1000, "app_served", "NaN", uri="/a"))
    made = SampleWindows(fmt).translate(lines)
    counts = [w["completions"].get("/a", 0) for w in made.windows]
    return f"largest window: {max(counts)} completions (the counter grows 25 a window)"


def duplicate() -> str:
    fmt = _fmt("prometheus-kafka-adapter", cores=1, time_sum=None, users=None,
               busy_seconds="app_busy", completions="app_served")
    lines = [x for k in range(10) for x in (
        _adapter((T0 + 5 * k) * 1000, "app_busy", repr(0.5 * k)),
        _adapter((T0 + 5 * k) * 1000, "app_served", repr(10.0 * k), uri="/a"))]
    want = SampleWindows(fmt).translate(lines).windows
    got = SampleWindows(fmt).translate(
        lines[:10] + [_adapter((T0 + 20) * 1000, "app_served", "9999", uri="/a")] + lines[10:])
    return (f"{len(got.dead)} dead letters, windows as without it: {got.windows == want}, "
            f"completions {[w['completions']['/a'] for w in got.windows]}")


def systems_200() -> str:
    windows = [{"system": f"s{k:03d}", "tier": "front", "end": float(T0 + 5 * (i + 1)),
                "window_s": 5.0, "utilization": 0.3, "cores": 1, "completions": {"/a": 10},
                "response_time_s": {"/a": 0.01}, "users": 5}
               for i in range(60) for k in range(200)]
    lines = encode(windows, "otlp-json")
    stray = json.dumps({"resourceMetrics": [{"resource": {"attributes": [
        {"key": "namespace", "value": {"stringValue": "s007"}},
        {"key": "service", "value": {"stringValue": "front"}}]}, "scopeMetrics": [{"metrics": [
            {"name": "app_busy_seconds", "sum": {"aggregationTemporality": 2, "dataPoints": [
                {"timeUnixNano": str((T0 + 86_400) * 10 ** 9), "asDouble": 1.0}]}}]}]}]})
    half = len(lines) // 2
    made = SampleWindows(_fmt("otlp-json")).translate(lines[:half] + [stray] + lines[half:])
    return f"{len(made.windows)} of {len(windows)} windows made, {len(made.dead)} dead letters"


def tiny_window() -> str:
    def alarm(*_):
        raise TimeoutError("still running after 60 s")
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(60)
    try:
        fmt = _fmt("telegraf", window_s=0.001)
        shop = demo_records(DemoScenario(duration_s=500))
        lines = encode(shop, "telegraf")[:200]
        made = SampleWindows(fmt).translate(lines)
        return f"{len(made.windows)} windows"
    finally:
        signal.alarm(0)


def main() -> None:
    corpus()
    for name, call in (("staleness marker on a counter at 88,000", staleness),
                       ("duplicate sample (same time, 9999)", duplicate),
                       ("200-system OTLP, one sample a day ahead", systems_200),
                       ("[input] window_s = 0.001, 200 records", tiny_window)):
        print(f"{name:42s} {_outcome(call)}")


if __name__ == "__main__":
    main()
