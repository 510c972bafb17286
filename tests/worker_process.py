"""``perfcast worker`` as a real subprocess: for the tests that run the pipeline against the real
Kafka (through :mod:`pipeline_harness`) and for the benches that time it
(``bench/speed/kafka.py``, ``bench/speed/worker_ab.py``: they import it as
``tests.worker_process``).
No pytest here, so that a bench can import it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Worker:
    """``perfcast worker`` as a real subprocess (so that it can be SIGKILLed)."""

    def __init__(self, config: Path, app_id: str, log: Path, partitions: int = 2, *,
                 root: Path = ROOT, loglevel: str | None = None,
                 env: dict[str, str] | None = None,
                 module: str = "streams.cli.commands") -> None:
        """``root``: the source tree to run (``bench/speed/worker_ab.py`` compares two);
        ``env``: variables added to the worker's environment; ``module``: the command line's
        module, found in ``root`` or in ``tests/`` (a test's wrapper of it)."""
        self.cmd = [sys.executable, "-m", module, "worker", "--config", str(config),
                    "--app-id", app_id, "--partitions", str(partitions), "--loglevel",
                    loglevel or os.environ.get("PERFCAST_WORKER_LOGLEVEL", "warning")]
        self.root = root
        self.log = log
        self.env = env or {}
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Worker":
        env = {**os.environ, **self.env,
               "PYTHONPATH": os.pathsep.join([str(self.root), str(Path(__file__).parent)])}
        fh = open(self.log, "a")
        self.proc = subprocess.Popen(self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                     cwd=self.root, start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def log_tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-n:])
