"""Shared test setup.

``line_solver`` (the independent peer, a test dependency) inserts its own package directory into
``sys.path`` on import; its ``solvers``/``io``/``utils`` sub-packages would then shadow ours.
Importing our top-level packages first pins them in ``sys.modules``.
"""

import estimators  # noqa: F401
import solvers  # noqa: F401
import solvers.processes  # noqa: F401
import streams  # noqa: F401
