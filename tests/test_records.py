"""The input window record (streams.core.records): what parses to which Window, and that every
rejection names the offending field and shows the offending value."""

from __future__ import annotations

import json
import math

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.records import (MAX_CORES, MAX_NAME, MAX_USERS, UTILIZATION_TOLERANCE,
                             InvalidWindow, Window, parse_window)

#: 2026-11-20T10:00:05Z as epoch seconds (1_795_168_800 is 10:00:00Z, the demo's origin)
END = 1_795_168_805.0


def _record(**changes):
    """A valid record with every field, ``changes`` applied (``...`` removes a field)."""
    rec = {"system": "shop", "tier": "db", "end": "2026-11-20T10:00:05Z", "window_s": 5.0,
           "utilization": 0.63, "cores": 2,
           "completions": {"home": 120, "best_sellers": 14},
           "response_time_s": {"home": 0.012},
           "users": 100}
    for key, value in changes.items():
        if value is ...:
            rec.pop(key, None)
        else:
            rec[key] = value
    return rec


def _minimal(**changes):
    rec = _record(**changes)
    for optional in ("cores", "response_time_s", "users"):
        if optional not in changes:
            rec.pop(optional)
    return rec


def _rejects(raw):
    with pytest.raises(InvalidWindow) as info:
        parse_window(raw)
    return info.value


# --------------------------------------------------------------------------------------------
# valid records
# --------------------------------------------------------------------------------------------

def test_full_record_parses_to_the_expected_window():
    w = parse_window(json.dumps(_record()))
    assert w == Window(system="shop", tier="db", end=END, window_s=5.0, utilization=0.63,
                       cores=2, completions={"home": 120.0, "best_sellers": 14.0},
                       response_time_s={"home": 0.012}, users=100)
    assert w.total_completions == 134.0
    assert w.busy_time == pytest.approx(0.63 * 5.0)


@pytest.mark.parametrize("end", [
    "2026-11-20T10:00:05Z",
    "2026-11-20T11:00:05+01:00",
    "2026-11-20T04:30:05-05:30",
    "2026-11-20T10:00:05.000Z",
    1_795_168_805,
    1_795_168_805.0,
])
def test_end_forms_all_give_the_same_epoch_seconds(end):
    """ISO with Z, with an offset, with fractional seconds, and epoch seconds (int or float)
    are the same instant."""
    w = parse_window(json.dumps(_minimal(end=end)))
    assert w.end == END
    assert isinstance(w.end, float)


def test_optional_fields_absent_take_their_defaults():
    w = parse_window(json.dumps(_minimal()))
    assert (w.cores, w.response_time_s, w.users) == (1, {}, None)


def test_null_optional_fields_are_absent_and_extra_fields_ignored():
    w = parse_window(json.dumps(_record(response_time_s=None, users=None, producer="agent-7",
                                        host={"name": "db1"})))
    assert (w.response_time_s, w.users) == ({}, None)


def test_bytes_text_and_mapping_inputs_agree():
    rec = _record()
    text = json.dumps(rec)
    assert parse_window(text.encode("utf-8")) == parse_window(text) == parse_window(rec)
    assert parse_window(bytearray(text.encode())) == parse_window(memoryview(text.encode()))


def test_whole_floats_are_accepted_for_counts():
    w = parse_window(json.dumps(_record(cores=4.0, users=7.0)))
    assert (w.cores, w.users) == (4, 7)
    assert isinstance(w.cores, int) and isinstance(w.users, int)


def test_boundary_values_are_accepted():
    w = parse_window(json.dumps(_record(utilization=1.0, window_s=86_400, users=0, end=0,
                                        completions={"home": 0})))
    assert (w.utilization, w.window_s, w.users, w.end) == (1.0, 86_400.0, 0, 0.0)
    assert parse_window(json.dumps(_record(utilization=0))).utilization == 0.0


# --------------------------------------------------------------------------------------------
# rejections: field and value
# --------------------------------------------------------------------------------------------

def _bad(field, value, **changes):
    """(record text, expected field, text the message must contain)."""
    return json.dumps(_record(**changes)), field, value


BAD = {
    "missing system": _bad("system", "None", system=...),
    "missing tier": _bad("tier", "None", tier=...),
    "missing end": _bad("end", "None", end=...),
    "missing window_s": _bad("window_s", "None", window_s=...),
    "missing utilization": _bad("utilization", "None", utilization=...),
    "missing completions": _bad("completions", "None", completions=...),
    "null system": _bad("system", "None", system=None),
    "blank system": _bad("system", "'  '", system="  "),
    "numeric tier": _bad("tier", "7", tier=7),
    "control char in tier": _bad("tier", "'d\\x07b'", tier="d\x07b"),
    "newline in system": _bad("system", "'sh\\nop'", system="sh\nop"),
    "DEL in tier": _bad("tier", "'db\\x7f'", tier="db\x7f"),
    "C1 control in system": _bad("system", "'shop\\x85'", system="shop\x85"),
    "system ending in a backslash": _bad("system", "'shop\\\\'", system="shop\\"),
    "newline in a class name": _bad("completions", "'ho\\nme'", completions={"ho\nme": 3}),
    "tab in a response-time class": _bad("response_time_s", "'ho\\tme'",
                                         response_time_s={"ho\tme": 0.1}),
    "class ending in a backslash": _bad("completions", "'home\\\\'",
                                        completions={"home\\": 3}),
    "cores beyond the bound": _bad("cores", "1000001", cores=1_000_001),
    "users 2**63": _bad("users", str(2**63), users=2**63),
    "users beyond the bound": _bad("users", str(MAX_USERS + 1), users=MAX_USERS + 1),
    "long tier": _bad("tier", "'xxx", tier="x" * (MAX_NAME + 1)),
    "negative end": _bad("end", "-5", end=-5),
    "negative window_s": _bad("window_s", "-5.0", window_s=-5.0),
    "zero window_s": _bad("window_s", "0", window_s=0),
    "window_s over a day": _bad("window_s", "86401", window_s=86_401),
    "negative utilization": _bad("utilization", "-0.1", utilization=-0.1),
    "utilization 1.2": _bad("utilization", "1.2", utilization=1.2),
    "string utilization": _bad("utilization", "'0.5'", utilization="0.5"),
    "cores 0": _bad("cores", "0", cores=0),
    "cores 1.5": _bad("cores", "1.5", cores=1.5),
    "cores -2": _bad("cores", "-2", cores=-2),
    "users -1": _bad("users", "-1", users=-1),
    "users 2.5": _bad("users", "2.5", users=2.5),
    "completions empty": _bad("completions", "{}", completions={}),
    "completions list": _bad("completions", "[120, 14]", completions=[120, 14]),
    "completions number": _bad("completions", "120", completions=120),
    "completion count negative": _bad("completions.home", "-3", completions={"home": -3}),
    "completion count text": _bad("completions.home", "'3'", completions={"home": "3"}),
    "empty class name": _bad("completions", "''", completions={"": 3}),
    "response time negative": _bad("response_time_s.home", "-0.5",
                                   response_time_s={"home": -0.5}),
    "response_time_s not object": _bad("response_time_s", "0.5", response_time_s=0.5),
    "ISO without zone": _bad("end", "'2026-11-20T10:00:05'", end="2026-11-20T10:00:05"),
    "not a time": _bad("end", "'yesterday'", end="yesterday"),
    "bool utilization": _bad("utilization", "True", utilization=True),
    "bool window_s": _bad("window_s", "True", window_s=True),
    "bool end": _bad("end", "False", end=False),
    "bool cores": _bad("cores", "True", cores=True),
    "bool users": _bad("users", "True", users=True),
    "bool completion count": _bad("completions.home", "True", completions={"home": True}),
    "bool response time": _bad("response_time_s.home", "False",
                               response_time_s={"home": False}),
}


@pytest.mark.parametrize("text, field, shown", BAD.values(), ids=BAD.keys())
def test_rejection_names_field_and_value(text, field, shown):
    err = _rejects(text)
    assert err.field == field
    assert shown in str(err)
    assert str(err).startswith(f"{field}: ")
    assert err.reason and err.reason in str(err)


NON_FINITE = {
    # JSON text with the non-standard literals Python's json module accepts
    "NaN utilization": ('{"system": "s", "tier": "t", "end": 10, "window_s": 5, '
                        '"utilization": NaN, "completions": {"a": 1}}', "utilization", "nan"),
    "Infinity window_s": ('{"system": "s", "tier": "t", "end": 10, "window_s": Infinity, '
                          '"utilization": 0.5, "completions": {"a": 1}}', "window_s", "inf"),
    "-Infinity end": ('{"system": "s", "tier": "t", "end": -Infinity, "window_s": 5, '
                      '"utilization": 0.5, "completions": {"a": 1}}', "end", "-inf"),
    "NaN completion count": ('{"system": "s", "tier": "t", "end": 10, "window_s": 5, '
                             '"utilization": 0.5, "completions": {"a": NaN}}',
                             "completions.a", "nan"),
    "Infinity response time": ('{"system": "s", "tier": "t", "end": 10, "window_s": 5, '
                               '"utilization": 0.5, "completions": {"a": 1}, '
                               '"response_time_s": {"a": Infinity}}', "response_time_s.a", "inf"),
    "NaN cores": ('{"system": "s", "tier": "t", "end": 10, "window_s": 5, '
                  '"utilization": 0.5, "cores": NaN, "completions": {"a": 1}}', "cores", "nan"),
    "Infinity users": ('{"system": "s", "tier": "t", "end": 10, "window_s": 5, '
                       '"utilization": 0.5, "users": Infinity, "completions": {"a": 1}}',
                       "users", "inf"),
    "1e400 overflows to inf": ('{"system": "s", "tier": "t", "end": 10, "window_s": 5, '
                               '"utilization": 1e400, "completions": {"a": 1}}',
                               "utilization", "inf"),
}


@pytest.mark.parametrize("text, field, shown", NON_FINITE.values(), ids=NON_FINITE.keys())
def test_non_finite_numbers_are_rejected(text, field, shown):
    err = _rejects(text)
    assert err.field == field
    assert shown in str(err)


def test_the_negative_completion_count_value_is_kept_on_the_error():
    err = _rejects(json.dumps(_record(completions={"home": 3, "search": -2})))
    assert (err.field, err.value) == ("completions.search", -2)


@pytest.mark.parametrize("raw, shown", [
    ('{"system": "shop", "tier": ', "'{\"system\": \"shop\", \"tier\": '"),
    ("not json at all", "'not json at all'"),
    ("", "''"),
    ('{"system": "shop"} trailing', "trailing"),
])
def test_malformed_json_is_a_record_error_showing_the_text(raw, shown):
    err = _rejects(raw)
    assert err.field == "record"
    assert "malformed JSON" in err.reason
    assert shown in str(err)


@pytest.mark.parametrize("raw, shown", [
    ("[1, 2]", "[1, 2]"), ("42", "42"), ('"text"', "'text'"), ("null", "None"),
    ("true", "True"),
])
def test_non_object_json_is_a_record_error(raw, shown):
    err = _rejects(raw)
    assert err.field == "record"
    assert "(got " + shown in str(err)


@pytest.mark.parametrize("raw", [42, 4.5, None, [1, 2], ("a",), object()])
def test_non_text_non_mapping_input_is_a_record_error(raw):
    err = _rejects(raw)
    assert err.field == "record"
    assert repr(raw)[:20] in str(err)


def test_bytes_that_are_not_utf8_are_a_record_error_showing_the_bytes():
    raw = b'\xff\xfe{"system": "shop"}'
    err = _rejects(raw)
    assert err.field == "record"
    assert "not UTF-8" in err.reason
    assert "\\xff\\xfe" in str(err)


def test_long_values_are_shortened_in_the_message():
    err = _rejects("x" * 10_000)
    assert err.field == "record"
    assert len(str(err)) < 300
    assert "xxxx..." in str(err)


# --------------------------------------------------------------------------------------------
# hostile inputs: still InvalidWindow, never another exception (these failed before the fixes
# in streams/core/records.py: OverflowError, RecursionError, ValueError escaped parse_window)
# --------------------------------------------------------------------------------------------

HUGE = "1" + "0" * 400          # a JSON integer beyond the float range


@pytest.mark.parametrize("field, text", [
    ("end", json.dumps(_record()).replace('"2026-11-20T10:00:05Z"', HUGE)),
    ("window_s", json.dumps(_record()).replace('5.0', HUGE, 1)),
    ("cores", json.dumps(_record()).replace('"cores": 2', f'"cores": {HUGE}')),
    ("users", json.dumps(_record()).replace('"users": 100', f'"users": {HUGE}')),
    ("completions.home", json.dumps(_record()).replace('"home": 120', f'"home": {HUGE}')),
])
def test_integers_beyond_float_range_are_rejected_not_overflow(field, text):
    assert HUGE in text
    err = _rejects(text)
    assert err.field == field
    assert "1000000000" in str(err)


def test_integer_with_too_many_digits_is_a_record_error():
    # CPython refuses to convert integer text of more than 4300 digits (a ValueError that is not
    # a JSONDecodeError)
    text = json.dumps(_record()).replace('"users": 100', '"users": ' + "9" * 5000)
    assert _rejects(text).field == "record"


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' * 50_000])
def test_deeply_nested_json_is_a_record_error(text):
    assert _rejects(text).field == "record"


# --------------------------------------------------------------------------------------------
# utilization above 1 within the tolerance: clamped and flagged (the input contract of docs/pipeline.md)
# --------------------------------------------------------------------------------------------

def test_utilization_within_the_tolerance_is_clamped_to_one_and_flagged():
    assert UTILIZATION_TOLERANCE == 0.02
    w = parse_window(json.dumps(_record(utilization=1.013)))
    assert w.utilization == 1.0
    assert w.flags == ("utilization 1.013 clamped to 1 (within tolerance 0.02)",)
    # the edge of the tolerance is inside it
    assert parse_window(_record(utilization=1.02)).utilization == 1.0
    # the contract's record is the clamped window; the flag is not part of it
    assert "flags" not in w.to_record() and w.to_record()["utilization"] == 1.0


@pytest.mark.parametrize("value", [1.0200001, 1.05, 1.2, 2.0])
def test_utilization_beyond_the_tolerance_is_rejected_naming_the_tolerance(value):
    err = _rejects(json.dumps(_record(utilization=value)))
    assert err.field == "utilization" and err.value == value
    assert "tolerance 0.02" in err.reason and "utilization_tolerance" in err.reason
    assert f"(got {value!r})" in str(err)


def test_the_tolerance_is_a_parameter_and_rounding_is_clamped_whatever_it_is():
    assert parse_window(_record(utilization=1.04), 0.05).flags == (
        "utilization 1.04 clamped to 1 (within tolerance 0.05)",)
    with pytest.raises(InvalidWindow, match="tolerance 0"):
        parse_window(_record(utilization=1.01), 0.0)
    w = parse_window(_record(utilization=1 + 1e-12), 0.0)
    assert w.utilization == 1.0 and w.flags == (
        "utilization 1.000000000001 clamped to 1 (within rounding)",)


@pytest.mark.parametrize("value", [-1e-12, -1e-15, -1e-9])
def test_negative_rounding_residue_is_clamped_to_zero_and_flagged(value):
    w = parse_window(json.dumps(_record(utilization=value)))
    assert w.utilization == 0.0
    assert w.flags == (f"utilization {value!r} clamped to 0 (within rounding)",)


@pytest.mark.parametrize("value", [-1.1e-9, -1e-6, -0.01])
def test_negative_utilization_beyond_rounding_is_rejected(value):
    """The tolerance is for utilization above 1 only: a negative field is invalid."""
    err = _rejects(_record(utilization=value))
    assert err.field == "utilization" and "[0, 1]" in err.reason


def test_windows_within_zero_and_one_take_the_fast_path_and_carry_no_flag():
    """Only a window outside [0, 1] leaves the msgspec fast path (bench/speed/pipeline.py)."""
    from streams.core.records import _fast

    for u in (0.0, 0.63, 1.0):
        text = json.dumps(_record(utilization=u))
        fast = _fast(text)
        assert fast is not None and fast.flags == () and fast == parse_window(text)
    for u in (1.013, -1e-12):                     # the fast path refuses: the validator runs
        with pytest.raises(msgspec.ValidationError, match="utilization"):
            _fast(json.dumps(_record(utilization=u)))


# --------------------------------------------------------------------------------------------
# bounds that keep every sink and estimator working (poison pills)
# --------------------------------------------------------------------------------------------

def test_cores_and_users_at_their_bounds_are_accepted():
    w = parse_window(json.dumps(_record(cores=MAX_CORES, users=MAX_USERS)))
    assert (w.cores, w.users) == (4096, 10**9)
    assert parse_window(_record(cores=float(MAX_CORES), users=float(MAX_USERS))) == w


@pytest.mark.parametrize("name", ["a\\b", "a\\,b c=d", "\\lead", "caf\u00e9", "\u2603 snow",
                                  "x" * MAX_NAME])
def test_printable_names_with_backslashes_and_line_protocol_specials_are_accepted(name):
    w = parse_window(json.dumps(_record(system=name, tier=name, completions={name: 3},
                                        response_time_s={name: 0.1})))
    assert (w.system, w.tier, list(w.completions), list(w.response_time_s)) == \
        (name, name, [name], [name])


def test_a_lone_surrogate_is_named_as_not_valid_unicode():
    err = _rejects('{"system": "a\\ud800", "tier": "db", "end": 10, "window_s": 5, '
                   '"utilization": 0.5, "completions": {"home": 1}}')
    assert err.field == "system" and str(err).startswith("system: not valid Unicode")
    assert err.value == "a\ud800"


@pytest.mark.parametrize("field, changes", [
    ("system", {"system": "\ud800"}),
    ("tier", {"tier": "db\udfff"}),
    ("completions", {"completions": {"home\ud800": 3}}),
    ("response_time_s", {"response_time_s": {"\udc00": 0.1}}),
])
def test_lone_surrogates_in_names_are_rejected(field, changes):
    """JSON may escape a lone surrogate (``"\\ud800"``); such a name cannot be written as UTF-8
    (the SQLite store and InfluxDB line protocol crashed on it), so it is refused at the input."""
    text = json.dumps(_record(**changes))            # ensure_ascii: "\\ud800" escapes
    assert "\\ud" in text
    assert _rejects(text).field == field


def test_iso_time_before_1970_is_rejected_like_negative_epoch_seconds():
    err = _rejects(json.dumps(_record(end="1960-01-01T00:00:00Z")))
    assert err.field == "end"
    assert "1960-01-01" in str(err)


@pytest.mark.parametrize("count, window_s", [(1e-12, 5.0), (6e9, 5.0), (2.0, 1e-9 * 0.5)])
def test_completion_rates_beyond_what_monitoring_can_produce_are_rejected(count, window_s):
    """A non-zero rate below 1e-9/s or above 1e9/s (what the demand estimators can take; a
    fractional count of 1e-12 crashed the pipeline's Kalman filter before) names the class."""
    err = _rejects(_record(window_s=window_s, completions={"home": count}))
    assert err.field == "completions.home"
    assert "per second" in str(err)


def test_response_times_beyond_thirty_years_are_rejected():
    err = _rejects(_record(response_time_s={"home": 2e9}))
    assert err.field == "response_time_s.home"


# --------------------------------------------------------------------------------------------
# round trip property
# --------------------------------------------------------------------------------------------

names = st.text(st.characters(min_codepoint=32, exclude_categories=("Cs", "Cc")), min_size=1,
                max_size=30).filter(lambda s: s.strip() and not s.endswith("\\"))
# counts whose rate over windows of 1 ms .. 1 day stays within the contract's [1e-9, 1e9] per s
counts = st.one_of(st.just(0.0), st.integers(1, 10**6).map(float),
                   st.floats(1e-3, 1e6, allow_nan=False, allow_infinity=False))


@st.composite
def windows(draw):
    return Window(
        system=draw(names), tier=draw(names),
        end=draw(st.floats(0.0, 4e9)),
        window_s=draw(st.floats(1e-3, 86_400.0)),
        utilization=draw(st.floats(0.0, 1.0)),
        cores=draw(st.integers(1, 512)),
        completions=draw(st.dictionaries(names, counts, min_size=1, max_size=5)),
        response_time_s=draw(st.dictionaries(names, st.floats(0.0, 1e4), max_size=5)),
        users=draw(st.none() | st.integers(0, 10**7)),
    )


@settings(max_examples=300, deadline=None)
@given(windows())
def test_to_record_round_trips_through_parse_window(window):
    """Any window within the contract survives ``to_record`` as a mapping and as JSON text."""
    record = window.to_record()
    assert parse_window(record) == window
    assert parse_window(json.dumps(record, allow_nan=False)) == window
    assert parse_window(json.dumps(record).encode()) == window
    assert all(math.isfinite(v) for v in parse_window(record).completions.values())


# --------------------------------------------------------------------------------------------
# the msgspec fast path accepts a subset of what the validator accepts, with the same result
# --------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**25, 10**25)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
    | st.sampled_from(["2026-11-20T10:00:05Z", "2026-11-20T10:00:05", "", " ", "\x01"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=6) | st.sampled_from(["home", "", "a" * 201]), inner, max_size=3),
    max_leaves=6)
#: numbers at the contract's limits (utilization 1, window 1 day, epoch 1e11, int64, ...)
BOUNDARIES = [0, 1, 2, -1, 0.0, -0.0, 0.5, 1.0, 1.5, 1.0000001, 2.0, 86_400, 86_400.5, 1e11,
              1.5e11, 2**63 - 1, 2**63, 2**64, 1e300, 10**400, {}, {"home": -1}, {"": 1}]
FIELDS = ("system", "tier", "end", "window_s", "utilization", "cores", "completions",
          "response_time_s", "users")


@st.composite
def mutated_records(draw):
    """A valid record with some fields replaced by arbitrary JSON values or removed."""
    record = _record()
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        if draw(st.booleans()):
            record.pop(name, None)
        else:
            record[name] = draw(st.sampled_from(BOUNDARIES) | json_values)
    return record


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(mutated_records())
def test_fast_path_accepts_only_what_the_validator_accepts_and_builds_the_same_window(record):
    from streams.core.records import _fast, _validate

    for raw in (record, json.dumps(record), json.dumps(record).encode()):
        try:
            fast = _fast(raw)
        except Exception:                     # noqa: BLE001 - any failure defers to the validator
            fast = None
        try:
            slow = _validate(raw)
        except InvalidWindow:
            assert fast is None, f"fast path accepted a record the validator rejects: {raw!r}"
            continue
        assert fast is None or fast == slow
        assert parse_window(raw) == slow
