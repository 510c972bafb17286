"""The database's session among the host's sessions: lift its autogroup niceness so that other
jobs' work does not take the database's CPU as a peer.

With the kernel's autogroups (``kernel.sched_autogroup_enabled``, the default of desktop and
many cloud kernels) each session is one scheduling entity, and CFS shares a CPU fairly among the
runnable sessions whatever the niceness of their processes (Galbraith 2010): a process at nice 19
in another session takes as much of the database's CPU as the database. ``pg_ctl start`` puts
the postmaster in a session of its own, and PostgreSQL starts each child (each client's backend)
in another one, so setting those sessions' autogroup niceness restores what a dedicated database
server has, and nothing else of the host moves. Used by ``infra/testbed/up.sh`` (every testbed
start, the CI test's too: once, then ``--follow`` for the backends of new connections) and by
the campaign (:mod:`bench.testbed.campaign`, which records the line).

    python -m bench.testbed.autogroup RUN_DIR [--nice -20] [--follow 1]

prints one line: the autogroup as the kernel then reads it, or why it was left alone (no
autogroups, or not permitted: lowering a niceness takes ``CAP_SYS_NICE``); it fails only on a
niceness outside [-20, 19] or a run dir without a running postmaster.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _stat(proc: Path, pid: int) -> list[str]:
    """proc(5)'s stat fields after the command's closing parenthesis: state, ppid, pgrp,
    session, ..."""
    return (proc / str(pid) / "stat").read_text().rpartition(")")[2].split()


def db_sessions(run_dir: Path, proc: Path = Path("/proc")) -> list[int]:
    """The sessions of the database: the postmaster's and each of its children's that leads a
    session of its own (PostgreSQL starts every child, each client's backend too, with
    ``setsid``, so each is a session, an autogroup, of its own); the postmaster first.

    A postmaster that does not lead its own session (``pg_ctl`` gives it one) raises
    :class:`RuntimeError`: its whole session, the caller's work too, would be lifted."""
    pid = int((run_dir / "pg" / "postmaster.pid").read_text().split()[0])
    session = int(_stat(proc, pid)[3])
    if session != pid:
        raise RuntimeError(f"the postmaster (pid {pid}) shares session {session} with other "
                           "processes, which its autogroup would lift too")
    children = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or entry.name == str(pid):
            continue
        try:
            fields = _stat(proc, int(entry.name))
        except (FileNotFoundError, ProcessLookupError):
            continue                                  # it exited meanwhile
        if int(fields[1]) == pid and int(fields[3]) == int(entry.name):
            children.append(int(entry.name))
    return [pid, *sorted(children)]


def lift_db_autogroup(run_dir: Path, nice: int, proc: Path = Path("/proc")) -> str | None:
    """Set the autogroup niceness of every session of the database (:func:`db_sessions`: the
    postmaster's and each backend's) to ``nice``; the postmaster's autogroup line as the kernel
    then reads it, with the number of its children's sessions lifted, or ``None`` where the
    kernel has no autogroups. A write the kernel refuses raises :class:`PermissionError`.

    At 5 users without it, search's execution took 218 ms against its backend's 60 ms of CPU,
    with other sessions' nice-19 work 84% of the database's CPU; the campaign's foreign-CPU
    guard, which counts work at nice > 0 as yielding, cannot see it (Galbraith 2010). The
    postmaster's session alone is not enough: each backend leads a session of its own, and
    with the postmaster's alone lifted a backend still waited 2.1-2.6x its CPU time for the CPU
    (0.6x with its own session lifted, the rest its peer backend)."""
    if not -20 <= nice <= 19:
        raise ValueError(f"--db-autogroup-nice must be within [-20, 19], got {nice}")
    enabled = proc / "sys/kernel/sched_autogroup_enabled"
    if not enabled.exists() or enabled.read_text().strip() != "1":
        return None
    pid, *children = db_sessions(run_dir, proc)
    lifted = 0
    for child in children:
        group = proc / str(child) / "autogroup"
        try:
            if not group.read_text().strip().endswith(f"nice {nice}"):
                group.write_text(f"{nice}\n")
            lifted += 1
        except (FileNotFoundError, ProcessLookupError):
            continue                                  # a backend that ended meanwhile
    group = proc / str(pid) / "autogroup"
    group.write_text(f"{nice}\n")
    return f"{group.read_text().strip()}, and {lifted} child sessions"


def follow(run_dir: Path, nice: int, interval: float = 1.0, proc: Path = Path("/proc"),
           rounds: int | None = None) -> int:
    """Lift the database's sessions every ``interval`` seconds while the postmaster runs (a
    backend started by a new connection is a new session at the kernel's default niceness);
    ``rounds``: at most that many. The rounds made."""
    made = 0
    while rounds is None or made < rounds:
        try:
            lift_db_autogroup(run_dir, nice, proc)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            return made                               # the postmaster (or its pid file) is gone
        made += 1
        time.sleep(interval)
    return made


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
    p.add_argument("--follow", type=float, default=0.0, metavar="SECONDS",
                   help="then lift the new backends' sessions every SECONDS while the "
                        "postmaster runs (up.sh's db_autogroup process)")
    args = p.parse_args(argv)
    try:
        line = describe(args.run_dir, args.nice)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(line, flush=True)
    if args.follow > 0 and line.startswith("the database's session: /"):
        follow(args.run_dir, args.nice, args.follow)
    return 0


if __name__ == "__main__":
    sys.exit(main())
