"""The one exception tree of loadproof, and the exit code each branch maps to.

    LoadproofError
    ├── UsageError                exit 2: the user's input is wrong (one clear line, no traceback)
    │   ├── ConfigError           a profile or option that does not validate
    │   ├── RunDirError           a run directory that is missing or unreadable
    │   └── PortInUse             a port to listen on, or to launch an engine on, is taken (another engine?)
    ├── EnvironmentFailure        exit 3: the engine or the machine failed, not the user
    │   ├── EngineInstallError    the embedded engine could not be installed or prepared
    │   ├── EngineStartError      the engine exited or never became ready
    │   │   └── EngineStartCancelled  stopped (a supervisor's stop, Ctrl-C) while it was starting
    │   └── EngineBusy            the engine still holds requests when a run that needs it idle begins
    ├── AcceptanceFailed          exit 1: a scenario ran and its verdict is FAIL
    ├── Interrupted               exit 130: Ctrl-C or SIGTERM ended a command that keeps no run (serve, relay,
    │                             sim) once what it ran is stopped; the message says what was stopped
    ├── NothingMeasured           exit 4: a run ended and measured nothing: every request failed, or none was
    │                             recorded (for a search or sweep: none of its trials measured anything); the
    │                             message names the most frequent error's own text and its count
    ├── MetricsUnavailable        one reading of the engine's metrics failed; the scraper counts it, never
    │                             fatal (carries `status`: the source's HTTP status, None if it never answered)
    └── RequestError              one request failed; stored in its RequestRecord, never fatal
        ├── HTTPStatusError       a non-2xx answer before the stream started (carries `status`)
        ├── StreamError           an in-band error event inside a 200 stream
        ├── RequestTimeout        the per-request deadline passed
        └── Disconnected          the connection closed before the stream ended

Ctrl-C or SIGTERM (KeyboardInterrupt, no branch of the tree) is exit 130: what finished is kept, and an
interrupted search says its figure is a lower bound. The CLI maps these to exit codes in one place
(`loadproof.cli`).
"""

from __future__ import annotations


class LoadproofError(Exception):
    exit_code = 3


class UsageError(LoadproofError):
    exit_code = 2


class ConfigError(UsageError):
    pass


class RunDirError(UsageError):
    pass


class PortInUse(UsageError):
    """Something already listens on the port loadproof is to listen on, or to launch an engine on."""


class EnvironmentFailure(LoadproofError):
    exit_code = 3


class EngineInstallError(EnvironmentFailure):
    pass


class EngineStartError(EnvironmentFailure):
    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class EngineStartCancelled(EngineStartError):
    pass


class EngineBusy(EnvironmentFailure):
    """A run that measures the engine alone found it holding requests it did not send."""


class AcceptanceFailed(LoadproofError):
    exit_code = 1


class NothingMeasured(LoadproofError):
    """A run whose requests all failed (or that recorded none): no figure it printed measures the engine.
    Its own exit code, so a script tells it apart from a FAIL verdict (the engine measured, and short) and
    from an engine that never started."""

    exit_code = 4


class Interrupted(LoadproofError):
    """Ctrl-C or SIGTERM ended a command that keeps no run directory (serve, relay, sim), after it stopped what it
    ran: the message says what was stopped, in place of the run commands' "what finished is in the run directory"."""

    exit_code = 130


class MetricsUnavailable(LoadproofError):
    """No reading of the engine's metrics this time, and why (a status, a connection error: never a key)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RequestError(LoadproofError):
    """A failed request. `kind` is the stable string stored in RequestRecord.error_kind."""

    kind = "request"


class HTTPStatusError(RequestError):
    kind = "http_status"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class StreamError(RequestError):
    kind = "stream_error"


class RequestTimeout(RequestError):
    kind = "timeout"


class Disconnected(RequestError):
    kind = "disconnect"
