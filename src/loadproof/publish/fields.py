"""What each field of a run directory is: the kind table `publish` sanitizes by.

A field is named by its JSON path in its file, segments joined by `.`; `*` stands for any key of a map
or any item of a list (`gpus.*.temp_c`). A path names the field and everything under it, unless a longer
path says otherwise. The kinds (what the sanitizer does with a value of each: publish.sanitize):

    text     free text: every shape (publish.shapes) and every name-marked value (publish.scanner)
    name     an identifier or a word of a closed vocabulary (scenario, endpoint, model, family, ids);
             sanitized as text, so a host in a family's name still goes
    planted  a value a probe plants and its answer is checked for (public: loadproof made it up); as text,
             and the only part of a model's answer that is published (publish.bundle)
    url      becomes <url>; its host is learned
    host     becomes <host> (<ip> for an address); learned
    header   `Name: value`: the value goes whole under a secret-named name (publish.names), else as text
    path     an absolute path becomes <path>; a relative one is sanitized as text
    number   numbers, booleans, null and numeric strings stay; anything else becomes <redacted>
    secret   goes whole, whatever its shape (lists and maps included)
    argv     a command line: the item after a secret-named flag goes whole, every other item as text
    config   a user's configuration (a profile, a scenario's options): open-ended, so its keys name their
             values (publish.names: `api_key` secret, `host` host, `max_tokens` count, anything else
             text; lists as command lines)

A field of no declared kind is undeclared: its strings become <redacted> (<secret> under a secret-named
key), its numbers, booleans and nulls stay (a number's kind is its JSON type; under a secret-named key it
goes too), and its key stays only if it is a plain identifier that sanitizing leaves alone. So a field a
future loadproof adds is published safe, if less informative, until it is declared here.

The run directory's own fields are declared below, file by file. A scenario's plan (the manifest's
`plan`) is declared by the scenario: its catalog entry's `text_fields`, paths relative to the plan
(`sessions.*.expected: planted`); its numbers need no declaration.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from loadproof import catalog
from loadproof.store.run_dir import ANSWERS, CHUNKS, EVENTS, MANIFEST, METRICS, REQUESTS, TELEMETRY

TEXT, NAME, PLANTED, URL, HOST, HEADER, PATH, NUMBER, SECRET, ARGV, CONFIG = (
    "text",
    "name",
    "planted",
    "url",
    "host",
    "header",
    "path",
    "number",
    "secret",
    "argv",
    "config",
)
KINDS = frozenset({TEXT, NAME, PLANTED, URL, HOST, HEADER, PATH, NUMBER, SECRET, ARGV, CONFIG})
ANY = "*"

MANIFEST_FIELDS = {
    "run_id": NAME,
    "scenario": NAME,
    "options": CONFIG,
    "plan_version": NUMBER,
    "crosscheck": NUMBER,  # the crosscheck's version (metrics.engine_agreement)
    "schema.*": NUMBER,
    "target.url": URL,
    "target.model": NAME,
    "target.endpoint": NAME,
    "target.api_key_used": NUMBER,
    "target.extra_body": CONFIG,
    "target.tokenizer": PATH,
    "target.tokenizer_source": NAME,
    "target.metrics.kind": NAME,
    "target.metrics.url": URL,
    "target.token_counts": NAME,
    "target.thinking": NAME,
    "target.reasoning_effort": NAME,
    # a fleet (docs/fleet.md): its replicas' metrics URLs (each host learned and replaced, as every URL) and caches
    "target.fleet.replicas.*.url": URL,
    "target.fleet.replicas.*.block_tokens": NUMBER,
    "target.fleet.replicas.*.num_blocks": NUMBER,
    "target.fleet.replicas.*.kv_tokens": NUMBER,
    "target.fleet.router_metrics": URL,
    "target.fleet.discovered": NUMBER,
    "target.fleet.policy": NAME,
    "engine_version": NAME,
    "versions.*": NAME,
    "git": NAME,
    "start_wall_time": NAME,
    "end_wall_time": NAME,
    "clock_anchor.*": NUMBER,
    "num_records": NUMBER,
    "profile": CONFIG,
    "profiles": CONFIG,
    "workers": CONFIG,
    "engine.kind": NAME,
    "engine.launch": ARGV,
    "engine.env": CONFIG,
    "engine.ready_after_s": NUMBER,
    "engine.startup_report.line": TEXT,
    "engine.startup_report.*": NUMBER,
    "telemetry.gpus": NUMBER,
    "telemetry.names.*": NAME,
    "telemetry.driver": NAME,
    "telemetry.note": TEXT,
    "telemetry.energy_note": TEXT,
    "price.*": NUMBER,
    "schedule.*": NUMBER,
    "search.folder": NAME,
    "search.point": NAME,
    "search.*": NUMBER,
    "sweep.folder": NAME,
    "sweep.point": NAME,
    "sweep.*": NUMBER,
    "publication": CONFIG,  # replaced by publish's own; a published run published again carries one
    # a prediction contract (`run --prediction`): its figures' claim names and values judge the run
    "prediction.format": NAME,
    "prediction.scenario": NAME,
    "prediction.options": CONFIG,
    "prediction.tolerance_pct": NUMBER,
    "prediction.made_at": NAME,
    "prediction.sim_profile.*": NAME,
    "prediction.calibration_inputs.*.*": NAME,
    "prediction.figures.*.claim": NAME,
    "prediction.figures.*.driver": NAME,
    "prediction.figures.*.*": NUMBER,
    "prediction.assumptions.*.name": NAME,
    "prediction.assumptions.*.point": NAME,
    "prediction.assumptions.*.values.*": NAME,
    "prediction.assumptions.*.pinned_by": TEXT,
    "prediction.source": TEXT,
    # an imported run (`loadproof import`): the tool, its version, the file, and the figures the file states
    "source.tool": NAME,
    "source.version": NAME,
    "source.file": NAME,
    "source.sha256": NAME,
    "source.per_request": NUMBER,
    "source.part": NAME,
    "source.imported_by": NAME,
    "source.dated": TEXT,  # the file's field its dates come from, and how they were read; `import`: none
    "source.stated.*.figure": NAME,
    "source.stated.*.stat": NAME,
    "source.stated.*.where": NAME,
    "source.stated.*.value": NUMBER,
}
REQUEST_FIELDS = {
    "request_id": NAME,
    "endpoint": NAME,
    "scenario": NAME,
    "family": NAME,
    "prompt_id": NAME,
    "error_kind": NAME,
    "model": NAME,
    "finish_reason": NAME,
    "error_message": TEXT,
    "output_text": PLANTED,
    "reasoning_text": PLANTED,
    "tool_calls.*.name": NAME,
    "tool_calls.*.id": NAME,
    "tool_calls.*.arguments": PLANTED,
    "output_invalid_reason": TEXT,
    "media_hashes": NAME,  # each media item's digest: the only trace of a file in a bundle (never its bytes)
    **{
        name: NUMBER
        for name in """concurrency batch repeat ok http_status send_ns first_token_ns last_token_ns
        end_ns prompt_tokens output_tokens client_output_tokens cached_tokens num_chunks num_heartbeats chunk_usage
        intended_send_ns dispatch_ns planned_input_tokens planned_output_tokens worker chunk_ns
        chunk_tokens first_answer_ns reasoning_tokens engine_reasoning_tokens output_valid vectors prefill_hop_ns
        kv_bytes images video_frames audio_s media_pixels media_bytes media_tokens""".split()
    },
}
RUN_FILES: dict[str, dict[str, str]] = {
    MANIFEST: MANIFEST_FIELDS,
    REQUESTS: REQUEST_FIELDS,
    CHUNKS: {"request_id": NAME, "t_ns": NUMBER, "tokens": NUMBER},
    METRICS: {"t_ns": NUMBER, "wall_time_s": NUMBER, "values.*": NUMBER, "source": NAME},
    # the kind, then the event's own fields: counts and times, and these
    EVENTS: {
        "kind": NAME,
        "t_ns": NUMBER,
        "wall_time_s": NUMBER,
        "evidence": TEXT,
        "reason": TEXT,
        "outcome": NAME,
        "log": PATH,
        "url": URL,
    },
    TELEMETRY: {"t_ns": NUMBER, "wall_time_s": NUMBER, "host.*": NUMBER, "gpus.*.*": NUMBER, "xid_events.*.*": NUMBER},
    ANSWERS: {
        "suite": NAME,
        "item_id": NAME,
        "mode": NAME,
        "request_id": NAME,
        "lang": NAME,
        "error": NAME,
        "expected": TEXT,
        "extracted": TEXT,
        "extracted_strict": TEXT,
        "extracted_flexible": TEXT,
        "skipped": TEXT,
        "correct": NUMBER,
        "correct_strict": NUMBER,
        "correct_flexible": NUMBER,
        "length_tokens": NUMBER,
        "depth": NUMBER,
        # quality under load: the digest of the whole answer, and a changed answer's windows (model
        # text, cut to 64 characters like the extracted answers)
        "under_load": NUMBER,
        "answer_sha256": NAME,
        "answer_diff_at": NUMBER,
        "answer_text": TEXT,
        "idle_answer_text": TEXT,
    },
}
PLAN = "plan"


@dataclass
class Node:
    """One segment of the declared paths: the kind declared here (if any) and the longer paths below it."""

    kind: str | None = None
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, key: str) -> tuple[Node | None, bool]:
        """The node a key leads to, and whether it was named exactly (not through `*`)."""
        exact = self.children.get(key)
        return (exact, True) if exact is not None else (self.children.get(ANY), False)


def tree(declared: Mapping[str, str]) -> Node:
    """The declared paths as a tree; ValueError on a kind this module does not define."""
    root = Node()
    for path, kind in declared.items():
        if kind not in KINDS:
            raise ValueError(f"{path}: {kind!r} is not a field kind (publish.fields: {', '.join(sorted(KINDS))})")
        node = root
        for segment in path.split("."):
            node = node.children.setdefault(segment, Node())
        node.kind = kind
    return root


def plan_fields(scenario: str | None) -> Mapping[str, str]:
    """The kinds of a scenario's plan fields, from its catalog entry (none for a scenario it does not list)."""
    entry = catalog.SCENARIOS.get(scenario) if isinstance(scenario, str) else None
    return entry.text_fields if entry is not None else {}


def declarations(scenario: str | None) -> dict[str, Node]:
    """{file name: its declared tree} for a run of `scenario` (its plan's fields under the manifest's `plan`);
    built at each call (a hundred paths), so an entry added to the catalog later is seen."""
    files = {name: tree(fields) for name, fields in RUN_FILES.items()}
    files[MANIFEST] = tree({**MANIFEST_FIELDS, **{f"{PLAN}.{p}": k for p, k in plan_fields(scenario).items()}})
    return files


def values_of_kind(value: Any, node: Node | None, kind: str) -> Iterator[str]:
    """Every non-empty string under `node` declared `kind` (the plan's planted values, for publish.bundle)."""
    if node is None:
        return
    if node.kind == kind and not node.children:
        yield from (v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str) and v)
        return
    if isinstance(value, dict):
        for key, child in value.items():
            yield from values_of_kind(child, node.child(str(key))[0], kind)
    elif isinstance(value, list):
        for child in value:
            yield from values_of_kind(child, node.child(ANY)[0], kind)
