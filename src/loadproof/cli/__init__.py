"""The command line. Thin: parses options, calls the packages, maps errors to exit codes in one place.

Exit codes: 0 success / PASS, 1 acceptance FAIL or verification mismatch, 2 usage or input error,
3 engine or environment failure, 4 the run measured nothing (every request failed; `errors.NothingMeasured`),
130 interrupted.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import typer
from rich.text import Text

from loadproof.cli import apps, commands, ui
from loadproof.errors import EngineStartError, Interrupted, LoadproofError


def __getattr__(name: str) -> Any:
    """`app` and `run_app` with every command registered, for a program or test that imports them."""
    if name in ("app", "run_app"):
        commands.load()
        return getattr(apps, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    # SIGTERM takes the same path as Ctrl-C, so every `finally` (engine stop, file flush) runs. SIGINT
    # is set explicitly too: a shell starts background jobs with it ignored, and Python keeps that.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    commands.load(commands.needed(sys.argv[1:]))
    try:
        code = apps.app(standalone_mode=False)
    except Interrupted as exc:  # serve, relay, sim: no run directory; the message says what was stopped
        ui.err.print(str(exc), markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except LoadproofError as exc:
        ui.err.print(Text.assemble(("error:", "bold red"), " ", str(exc)), highlight=False, soft_wrap=True)
        if isinstance(exc, EngineStartError) and exc.log_tail:
            ui.err.print(exc.log_tail, markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        ui.err.print("interrupted; what finished is in the run directory")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors (missing option, bad value) from the parser
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            ui.err.print(f"error: {exc}", markup=False)
        sys.exit(2)
    if code == 130:  # typer turns KeyboardInterrupt into this return value outside standalone mode
        ui.err.print("interrupted; what finished is in the run directory")
    sys.exit(code if isinstance(code, int) else 0)
