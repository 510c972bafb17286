"""A sign of progress in a long quiet run: each test file's path as its first test starts,
with the wall-clock time and the time since the session began, on a line of its own
(``[01:02:03 +4m05s] tests/test_mva.py``). ``infra/test.sh`` turns it on
(``PERFCAST_TEST_PROGRESS=1``, ``tests/conftest.py``; or ``-p file_progress``): with ``-q`` pytest
prints only dots, so a file that runs for minutes looked like a hang. It prints nothing after
the last test, so pytest's summary line ("N passed in ...") stays its last line."""

from __future__ import annotations

import time

import pytest

__all__ = ["FileProgress", "pytest_configure", "stamp"]


def stamp(now: float, started: float) -> str:
    """``[HH:MM:SS +MmSSs]``: the wall clock (UTC) and the time since ``started``."""
    elapsed = int(now - started)
    return (f"[{time.strftime('%H:%M:%S', time.gmtime(now))} "
            f"+{elapsed // 60}m{elapsed % 60:02d}s]")


class FileProgress:
    """The plugin: remembers the file of the last test started."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.time()
        self.current: str | None = None

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]
                                ) -> None:
        path = nodeid.split("::", 1)[0]
        if path == self.current:
            return
        self.current = path
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        writer = reporter._tw                   # pytest's TerminalWriter: end a line of dots
        if writer.width_of_current_line:
            writer.line()
        reporter.write_line(f"{stamp(time.time(), self.started)} {path}")


def pytest_configure(config: pytest.Config) -> None:
    """Loaded as a plugin (``-p file_progress``): register :class:`FileProgress`."""
    config.pluginmanager.register(FileProgress(config), "perfcast-file-progress")
