"""Schema versions of the run directory: what the writer records, what each version's reader accepts, and
the one clear error for a version or a row this loadproof cannot read."""

import json

import pytest

from loadproof.errors import RunDirError
from loadproof.rundir import EngineSample, Event
from loadproof.rundir.manifest import SchemaVersions, TelemetryInfo
from loadproof.store.run_dir import RunWriter, load_run
from loadproof.store.schema import read_manifest


def test_a_written_manifest_records_every_version_and_keeps_unknown_keys_at_the_top(tmp_path):
    with RunWriter.create(tmp_path, "load") as writer:
        writer.write_manifest(
            {
                "run_id": writer.run_id,
                "scenario": "load",
                "telemetry": TelemetryInfo(gpus=0),
                "sweep": {"folder": "p01", "index": 1, "point": "rate", "rate_rps": 2.5},
                "from_a_later_scenario": {"k": [1, 2]},
            }
        )
    raw = json.loads((writer.path / "manifest.json").read_text())
    assert raw["schema"] == {"manifest": 1, "metrics": 1, "events": 1, "telemetry": 2, "answers": 1}
    assert raw["from_a_later_scenario"] == {"k": [1, 2]} and "extra" not in raw
    manifest = load_run(writer.path).manifest
    assert manifest.schema == SchemaVersions(telemetry=2)
    assert manifest.sweep is not None and manifest.sweep.rate_rps == 2.5 and manifest.sweep.point == "rate"
    assert manifest.extra == {"from_a_later_scenario": {"k": [1, 2]}}


def test_a_manifest_without_versions_is_version_1():
    manifest = read_manifest({"run_id": "x", "scenario": "capacity", "plan": {"window_s": 6}})
    assert manifest.schema is None and manifest.plan == {"window_s": 6} and manifest.plan_version is None


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"manifest": 2}, "manifest.json is schema version 2, newer than this loadproof reads (up to 1)"),
        ({"metrics": 3}, "metrics.jsonl is schema version 3, newer than this loadproof reads (up to 1)"),
        ({"events": 0}, "events.jsonl: schema version 0 is not a version of this file"),
        ({"answers": "one"}, "schema is not a map of file kinds to version numbers"),
    ],
)
def test_a_version_this_loadproof_does_not_read_is_one_clear_line(tmp_path, schema, said):
    with RunWriter.create(tmp_path, "capacity") as writer:
        writer.write_manifest({"run_id": writer.run_id, "scenario": "capacity"})
        writer.metric_sample(EngineSample(t_ns=1, values={"a": 1.0}))
        writer.event("cancel", t_ns=2)
    raw = json.loads((writer.path / "manifest.json").read_text())
    raw["schema"].update(schema)
    (writer.path / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(RunDirError) as failed:
        load_run(writer.path)
    assert said in str(failed.value) and "\n" not in str(failed.value)


def test_a_row_that_does_not_fit_its_type_names_the_file_and_the_row(tmp_path):
    with RunWriter.create(tmp_path, "capacity") as writer:
        writer.write_manifest({"run_id": writer.run_id, "scenario": "capacity"})
    (writer.path / "metrics.jsonl").write_text('{"t_ns": 1, "values": {}}\n{"t_ns": 2, "values": {"a": "full"}}\n')
    with pytest.raises(
        RunDirError,
        match=r"metrics.jsonl: row 2 does not fit the metrics schema \(Expected `float`, "
        r"got `str` - at `\$.values\[...\]`\)",
    ):
        load_run(writer.path)


def test_events_are_flat_on_disk_and_typed_in_memory(tmp_path):
    with RunWriter.create(tmp_path, "capacity") as writer:
        writer.write_manifest({"run_id": writer.run_id, "scenario": "capacity"})
        writer.event("admission_stalled", t_ns=5, evidence="3 waited", waiting=3)
        writer.write_event(Event(kind="cancel", t_ns=9, wall_time_s=100.5))
        writer.metric_sample(EngineSample(t_ns=7, wall_time_s=1.5, values={"a": 1.0}, source="relay"))
    rows = [json.loads(line) for line in (writer.path / "events.jsonl").read_text().splitlines()]
    assert list(rows[0]) == ["wall_time_s", "kind", "t_ns", "evidence", "waiting"]
    assert rows[1] == {"wall_time_s": 100.5, "kind": "cancel", "t_ns": 9}
    run = load_run(writer.path)
    stalled, cancel = run.events
    assert (stalled.kind, stalled.t_ns, stalled.evidence, stalled.fields) == (
        "admission_stalled",
        5,
        "3 waited",
        {"waiting": 3},
    )
    assert cancel == Event(kind="cancel", t_ns=9, wall_time_s=100.5)
    assert run.samples == [EngineSample(t_ns=7, wall_time_s=1.5, values={"a": 1.0}, source="relay")]
