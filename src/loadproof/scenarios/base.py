"""What every scenario shares: what it declares (`Scenario`), the command it is run from (`Setup`), and
the tokenizer it may re-count output with (`TokenCounter`). The target it talks to is `scenarios.target`;
how one run is recorded and reported is `scenarios.recording`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from tokenizers import Tokenizer

from loadproof.config.base import StrictModel
from loadproof.config.profile import Profile
from loadproof.errors import UsageError
from loadproof.protocol.routes import TEXT, Route
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.recording import FAILURE, Console, conclude, run_once
from loadproof.scenarios.target import Target, TargetOptions, resolve_target
from loadproof.scenarios.token_counts import require_token_source
from loadproof.store.run_dir import RunWriter

__all__ = ["Example", "NoCommandOptions", "Scenario", "Setup", "Target", "TokenCounter", "TokenizerUse"]


@dataclass(frozen=True)
class TokenizerUse:
    """Whether a scenario's command requires `--tokenizer`, and what for; `engine`: whether the engine's own
    /tokenize stands in for it when none is given (prompts sized with the engine's tokenizer); `needed`:
    whether the run cannot go without one or the other (it stops before the run, in one line)."""

    required: bool
    purpose: str
    engine: bool = False
    needed: bool = False


class Example(NamedTuple):
    """One example its command's `--help` ends with: what it does, and the options after `loadproof run NAME`
    (a test parses each one with the command's own parser)."""

    what: str
    args: str


class NoCommandOptions(StrictModel):
    """A scenario whose command has no options beyond its Options and the target's."""


class Scenario:
    """What every scenario declares, and how a run command builds it (`scenarios.lifecycle`).

    - `name`, `Options` (a StrictModel: every field is an option of `loadproof run NAME`, see
      `scenarios.options`), `summary` (the command's help), `examples` (2 to 4 `Example`s its `--help` ends
      with);
    - `CommandOptions`: options of the command that are not options of a run (a search, a log to read);
    - `tokenizer`: whether `--tokenizer` is required, optional or not offered; `tokenizer_use(options,
      route)` what a run of those options on that route needs of one (the scenario's `tokenizer` unless it says);
    - `endpoints`: the routes it measures (`protocol.routes.TEXT` unless it says; None: every route);
    - `check_endpoint(options, endpoint)`: what its options cannot do on that endpoint, one line before anything
      is sent;
    - `failure`: the line a FAIL verdict ends with;
    - `series_options`: the options that make its command a series of runs of its own (not repeatable as one);
    - `async run(writer, manifest, live)`: one run, recorded into `writer`, its fields set on `manifest` (the
      typed `rundir.Manifest`: the plan with `plans.attach_plan`) and written with `writer.write_manifest`,
      keeping `live` (a `scenarios.live.LiveStatus`) up to date for the console;
    - `prepare(setup)`: the scenario for a resolved command; `perform(setup, console)`: the command.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[StrictModel]]
    CommandOptions: ClassVar[type[StrictModel]] = NoCommandOptions
    summary: ClassVar[str] = ""
    examples: ClassVar[tuple[Example, ...]] = ()
    tokenizer: ClassVar[TokenizerUse | None] = None
    endpoints: ClassVar[tuple[str, ...] | None] = TEXT  # None: every route registered
    failure: ClassVar[str] = FAILURE
    # options whose value makes the command a series of runs of its own (a sweep, a search), where the scenario has
    # them: such a command is no unit of `--repeats` or `run ab --scenario` (`scenarios.repeats`)
    series_options: ClassVar[tuple[str, ...]] = ("sweep", "search")

    def __init__(self, target: Target, options: Any) -> None:
        self.target = target
        self.options = options
        self.status: Callable[[str], None] = lambda text: None  # the lifecycle prints these lines

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> object:
        """One run (each scenario has its own)."""
        raise NotImplementedError

    @classmethod
    def check_endpoint(cls, options: Any, endpoint: str) -> None:
        """Options that do not go with the endpoint: UsageError (nothing to check by default)."""

    @classmethod
    def tokenizer_use(cls, options: Any, route: Route) -> TokenizerUse | None:
        """What a run of `options` on `route` needs of a tokenizer (the target's resolution follows it): the
        scenario's `tokenizer` unless a run sends no text to size (a load run of media alone)."""
        return cls.tokenizer

    @classmethod
    def prepare(cls, setup: Setup, console: Console) -> Scenario:
        """The scenario a resolved command runs (a subclass adds what its command options give)."""
        return cls(setup.target, setup.options)

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        """The command: one run, reported, its verdict turned into the exit code."""
        scenario = cls.prepare(setup, console)
        conclude(run_once(scenario, setup.out, console, setup.manifest_extra), cls.failure)


@dataclass
class Setup:
    """A command whose options all passed: what its scenario's `prepare` and `perform` work from."""

    profile: Profile | None
    options: Any  # the scenario's Options
    command: Any  # its CommandOptions
    out: Path
    target_options: TargetOptions
    # the manifest's fields the command sets for its runs (the profile, the price, a prediction; a series point),
    # `scenarios.recording` fills the rest; a `prepare` replaces it (msgspec.structs.replace), never changes it
    # in place: a rate search's trials share it
    manifest_extra: Manifest = field(default_factory=Manifest)
    resolved: Target | None = None
    tokenizer: TokenizerUse | None = None  # the scenario's: whether to ask the engine's /tokenize, and need it

    @property
    def target(self) -> Target:
        """The target, resolved on the server the first time it is asked for (an A/B run whose arms both
        name their own server never asks the common one); for a scenario that needs a token source, one
        line before any run directory when it has none."""
        if self.resolved is None:
            use = self.tokenizer
            self.resolved = resolve_target(self.target_options, self.profile, tokenize=use is not None and use.engine)
            if use is not None and use.needed:
                require_token_source(self.resolved)
        return self.resolved


class TokenCounter:
    """Counts output tokens with the client-side tokenizer, to set beside the server's usage."""

    def __init__(self, path: Path) -> None:
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise UsageError(f"no tokenizer.json at {path}")
        self._tok = Tokenizer.from_file(str(file))

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def __call__(self, record: RequestRecord) -> None:
        if record.output_text:
            record.client_output_tokens = self.count(record.output_text)
