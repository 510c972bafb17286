"""The database's session among the host's sessions (bench/testbed/autogroup.py), as up.sh and
the campaign set it. No services: a directory stands in for /proc (a plain file for the kernel's
autogroup file, which would answer "/autogroup-7 nice -20" after the write)."""

from pathlib import Path

import pytest

from bench.testbed import autogroup, campaign
from bench.testbed.autogroup import describe, lift_db_autogroup


def _host(tmp_path, session=4242):
    proc, run = tmp_path / "proc", tmp_path / "run"
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "4242").mkdir()
    (run / "pg").mkdir(parents=True)
    (run / "pg" / "postmaster.pid").write_text("4242\n/tmp/run/pg\n")
    # a command with a parenthesis and a space in it: the fields count from the last ")"
    (proc / "4242" / "stat").write_text(f"4242 (post (gres) S 1 4242 {session} 0 -1 4194560\n")
    (proc / "4242" / "autogroup").write_text("/autogroup-7 nice 0\n")
    # two backends, each leading its own session as PostgreSQL starts them, and a process of
    # the postmaster's session (not a session of its own)
    for pid, sess in ((5001, 5001), (5002, 5002), (5003, 4242)):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "stat").write_text(f"{pid} (postgres) S 4242 {pid} {sess} 0 -1\n")
        (proc / str(pid) / "autogroup").write_text(f"/autogroup-{pid} nice 0\n")
    (proc / "77").mkdir()                         # another process of the host
    (proc / "77" / "stat").write_text("77 (python) R 1 77 77 0 -1\n")
    (proc / "77" / "autogroup").write_text("/autogroup-77 nice 0\n")
    return proc, run


def test_the_database_session_is_lifted_only_where_the_kernel_has_autogroups(tmp_path):
    proc, run = _host(tmp_path)
    assert lift_db_autogroup(run, -20, proc) is None                  # no autogroups at all
    (proc / "sys/kernel/sched_autogroup_enabled").write_text("0\n")
    assert lift_db_autogroup(run, -20, proc) is None
    assert describe(run, -20, proc) == (
        "the database's session: no autogroups on this kernel, nothing to lift")
    assert (proc / "4242" / "autogroup").read_text() == "/autogroup-7 nice 0\n"
    (proc / "sys/kernel/sched_autogroup_enabled").write_text("1\n")
    assert autogroup.db_sessions(run, proc) == [4242, 5001, 5002]
    assert lift_db_autogroup(run, -20, proc) == "-20, and 2 child sessions"
    assert [(proc / p / "autogroup").read_text() for p in ("5001", "5002", "5003", "77")] == [
        "-20\n", "-20\n", "/autogroup-5003 nice 0\n", "/autogroup-77 nice 0\n"]
    assert describe(run, -5, proc) == "the database's session: -5, and 2 child sessions"
    # follow: once per round while the postmaster runs, a new backend's session too
    (proc / "5004").mkdir()
    (proc / "5004" / "stat").write_text("5004 (postgres) S 4242 5004 5004 0 -1\n")
    (proc / "5004" / "autogroup").write_text("/autogroup-5004 nice 0\n")
    assert autogroup.follow(run, -20, 0.0, proc, rounds=2) == 2
    assert (proc / "5004" / "autogroup").read_text() == "-20\n"
    (run / "pg" / "postmaster.pid").unlink()
    assert autogroup.follow(run, -20, 0.0, proc) == 0      # the postmaster gone: it ends
    with pytest.raises(ValueError, match="within \\[-20, 19\\], got 30"):
        lift_db_autogroup(run, 30, proc)
    with pytest.raises(ValueError, match="got -21"):
        describe(run, -21, proc)
    # the campaign uses the same function (no second copy of the rule)
    assert campaign.lift_db_autogroup is autogroup.lift_db_autogroup


def test_nice_zero_leaves_the_session_alone(tmp_path):
    proc, run = _host(tmp_path)
    (proc / "sys/kernel/sched_autogroup_enabled").write_text("1\n")
    assert describe(run, 0, proc) == (
        "the database's session: left at the kernel's default (nice 0)")
    assert (proc / "4242" / "autogroup").read_text() == "/autogroup-7 nice 0\n"


def test_a_postmaster_sharing_its_callers_session_is_not_lifted(tmp_path):
    proc, run = _host(tmp_path, session=999)
    (proc / "sys/kernel/sched_autogroup_enabled").write_text("1\n")
    with pytest.raises(RuntimeError, match="shares session 999"):
        lift_db_autogroup(run, -20, proc)
    assert describe(run, -20, proc).startswith(
        "the database's session: not lifted (the postmaster (pid 4242) shares session 999")
    assert (proc / "4242" / "autogroup").read_text() == "/autogroup-7 nice 0\n"


def test_a_refused_write_is_a_noop_said_in_the_log(tmp_path, monkeypatch):
    proc, run = _host(tmp_path)
    (proc / "sys/kernel/sched_autogroup_enabled").write_text("1\n")
    write = Path.write_text

    def refuse(self, *a, **k):
        if self.name == "autogroup":
            raise PermissionError(1, "Operation not permitted")
        return write(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", refuse)
    assert describe(run, -20, proc) == (
        "the database's session: not lifted to autogroup nice -20 (not permitted: Operation "
        "not permitted; other sessions' work may take its CPU)")


def test_the_command_line_fails_on_a_bad_niceness_and_says_what_it_did(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "pg").mkdir(parents=True)
    assert autogroup.main([str(run), "--nice", "25"]) == 2
    assert "within [-20, 19], got 25" in capsys.readouterr().err
    assert autogroup.main([str(run), "--nice", "0"]) == 0
    assert capsys.readouterr().out == (
        "the database's session: left at the kernel's default (nice 0)\n")
