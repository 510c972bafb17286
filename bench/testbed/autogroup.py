"""The database's session among the host's sessions: lift its autogroup niceness so that other
jobs' work does not take the database's CPU as a peer.

With the kernel's autogroups (``kernel.sched_autogroup_enabled``, the default of desktop and
many cloud kernels) each session is one scheduling entity, and CFS shares a CPU fairly among the
runnable sessions whatever the niceness of their processes (Galbraith 2010): a process at nice 19
in another session takes as much of the database's CPU as the database. ``pg_ctl start`` puts
the postmaster in a session of its own (its backends are in it), so setting that session's
autogroup niceness restores what a dedicated database server has, and nothing else of the host
moves. Used by ``infra/testbed/up.sh`` (every testbed start, the CI test's too) and by the
campaign (:mod:`bench.testbed.campaign`, which records the line).

    python -m bench.testbed.autogroup RUN_DIR [--nice -20]

prints one line: the autogroup as the kernel then reads it, or why it was left alone (no
autogroups, or not permitted: lowering a niceness takes ``CAP_SYS_NICE``); it fails only on a
niceness outside [-20, 19] or a run dir without a running postmaster.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def lift_db_autogroup(run_dir: Path, nice: int, proc: Path = Path("/proc")) -> str | None:
    """Set the autogroup niceness of the postmaster's session (the testbed's run dir
    ``run_dir``) to ``nice``; the autogroup line as the kernel then reads it, or ``None`` where
    the kernel has no autogroups. A write the kernel refuses raises :class:`PermissionError`; a
    postmaster that does not lead its own session (``pg_ctl`` gives it one) raises
    :class:`RuntimeError`: the whole session, its caller's work too, would be lifted.

    At 5 users without it, search's execution took 218 ms against its backend's 60 ms of CPU,
    with other sessions' nice-19 work 84% of the database's CPU; the campaign's foreign-CPU
    guard, which counts work at nice > 0 as yielding, cannot see it (Galbraith 2010)."""
    if not -20 <= nice <= 19:
        raise ValueError(f"--db-autogroup-nice must be within [-20, 19], got {nice}")
    enabled = proc / "sys/kernel/sched_autogroup_enabled"
    if not enabled.exists() or enabled.read_text().strip() != "1":
        return None
    pid = int((run_dir / "pg" / "postmaster.pid").read_text().split()[0])
    # proc(5): the fields after the command's closing parenthesis are state, ppid, pgrp, session
    session = int((proc / str(pid) / "stat").read_text().rpartition(")")[2].split()[3])
    if session != pid:
        raise RuntimeError(f"the postmaster (pid {pid}) shares session {session} with other "
                           "processes, which its autogroup would lift too")
    group = proc / str(pid) / "autogroup"
    group.write_text(f"{nice}\n")
    return group.read_text().strip()


def describe(run_dir: Path, nice: int, proc: Path = Path("/proc")) -> str:
    """:func:`lift_db_autogroup` as one log line; a no-op (no autogroups, ``nice`` 0, a write
    the kernel refuses) says so instead of failing the testbed's start."""
    if nice == 0:
        return "the database's session: left at the kernel's default (nice 0)"
    try:
        line = lift_db_autogroup(run_dir, nice, proc)
    except PermissionError as e:
        return (f"the database's session: not lifted to autogroup nice {nice} (not permitted: "
                f"{e.strerror}; other sessions' work may take its CPU)")
    except RuntimeError as e:
        return f"the database's session: not lifted ({e})"
    if line is None:
        return "the database's session: no autogroups on this kernel, nothing to lift"
    return f"the database's session: {line}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path, help="the testbed's run dir (up.sh's TESTBED_RUN_DIR)")
    p.add_argument("--nice", type=int, default=-20,
                   help="the session's autogroup niceness, -20..19; 0: the kernel's default")
    args = p.parse_args(argv)
    try:
        print(describe(args.run_dir, args.nice))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
