"""Parse Python source with `ast` for the tests that read the repository's code (layers, routes, waits, argv).

CPython 3.11 keeps `ast`'s recursion counter in state shared by every thread of the interpreter, and a thread
switch while `ast.parse` builds its tree (a garbage collection running a finalizer, another thread formatting a
traceback, which in 3.11 parses the failing line with `ast` itself) can leave the counter off by the other
thread's work: `SystemError: AST constructor recursion depth mismatch (before=141, after=34)`, seen once in a
suite run on `trackers/otlp.py`, a file that parses fine (python/cpython#106905; the counter became
per-call state in 3.13). The tree does not depend on the interleaving, so a parse that fails that way is done
again; any other error is the source's and is raised.
"""

from __future__ import annotations

import ast

ATTEMPTS = 5


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source)`, again when CPython 3.11's shared recursion counter was disturbed by another thread."""
    for attempt in range(ATTEMPTS):
        try:
            return ast.parse(source, filename)
        except SystemError as e:
            if "recursion depth mismatch" not in str(e) or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")
