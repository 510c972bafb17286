"""Comments and docstrings state the rule and its reason, in terms the repository resolves.

History (what the code did before, on which date, in which issue) belongs in ``CHANGES.md``
and the commit bodies; a citation names the work by author and year (``docs/references.md``),
never a file outside the repository. This test reads every comment and docstring of the
product, the benchmarks and the tests and names each offending line.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("solvers", "estimators", "streams", "bench", "tests")

#: what a comment or docstring must not say, and why
FORBIDDEN = {
    # the papers' file numbers resolve only in a folder outside the repository
    "a paper cited by its file number": re.compile(r"\b[Pp]apers? 0\d\d\b"),
    "a document outside the repository": re.compile(r"\b(DESIGN|STYLE|DEVELOPERS)\.md\b|"
                                                    r"shared/papers"),
    # the issue tracker is outside the repository too; what an issue asked is in CHANGES.md
    "an issue number": re.compile(r"\b[Ii]ssues? #?\d+"),
    # a calendar date is history (a timestamp of test data, 2026-11-20T10:00:00Z, is not)
    "a date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b(?![T ]\d\d:)"),
}


def _sources() -> list[Path]:
    this = Path(__file__).resolve()
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                  if p.resolve() != this)


def _prose(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every comment and docstring in ``path``."""
    text = path.read_text()
    out = [(tok.start[0], tok.string) for tok in
           tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                first = body[0].lineno
                out += [(first + i, line) for i, line in
                        enumerate(body[0].value.value.splitlines())]
        # attribute docstrings (``#:`` comments are tokens above; a string after an assignment)
        if isinstance(node, (ast.Module, ast.ClassDef)):
            for prev, stmt in zip(node.body, node.body[1:]):
                if isinstance(prev, (ast.Assign, ast.AnnAssign)) and isinstance(stmt, ast.Expr) \
                        and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str):
                    out += [(stmt.lineno + i, line) for i, line in
                            enumerate(stmt.value.value.splitlines())]
    return out


def offences(path: Path) -> list[str]:
    rel = path.relative_to(ROOT)
    return [f"{rel}:{line}: {what}: {text.strip()[:100]}"
            for line, text in _prose(path)
            for what, pattern in FORBIDDEN.items() if pattern.search(text)]


def test_the_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""Fig. 2 of paper 000."""\n'
                      "x = 1  # the default was 16 until 2026-11-30 (issue 19)\n"
                      "START = '2026-11-20T10:00:00Z'  # 2026-11-20T10:00:00Z, the origin\n"
                      "def f():\n    '''See DESIGN.md.'''\n")
    found = [what for line, text in _prose(sample)
             for what, pattern in FORBIDDEN.items() if pattern.search(text)]
    assert sorted(found) == sorted(["a paper cited by its file number", "a date",
                                    "an issue number", "a document outside the repository"])


@pytest.mark.parametrize("package", PACKAGES)
def test_comments_and_docstrings_carry_no_history_and_no_outside_reference(package: str) -> None:
    found = [o for p in _sources() if p.relative_to(ROOT).parts[0] == package
             for o in offences(p)]
    assert not found, f"{len(found)} lines:\n" + "\n".join(found[:60])
