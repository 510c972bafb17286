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
        self.app_id = app_id
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

    def finished(self, bootstrap: str, topic: str) -> bool:
        """Whether the worker's consumer group (its application id) has committed every
        window of ``topic``: a worker commits a window only once its outputs are in Kafka
        (``streams/kafka/handover.py``), so nothing more is coming for what was produced."""
        return committed_to_end(bootstrap, self.app_id, topic)


def committed_to_end(bootstrap: str, group: str, topic: str) -> bool:
    """Whether consumer group ``group`` has committed the end offset of every partition of
    ``topic`` that holds records (read with a consumer of the group that never joins it)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        end = consumer.end_offsets(tps)
        return bool(tps) and all(end[tp] == 0 or (consumer.committed(tp) or 0) >= end[tp]
                                 for tp in tps)
    finally:
        consumer.close()
