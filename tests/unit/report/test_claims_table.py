"""`loadproof export` writes the run's claims, each with its interval's low, high, confidence and method, in
CSV and in Parquet, read back here with the csv module and pyarrow and compared with the claims `report`
computes; a run whose claims cannot be computed still exports, its claims table empty and saying why."""

from __future__ import annotations

import csv
import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.metrics import compute_claims
from loadproof.store.run_dir import load_run
from tests.unit.publish.synthetic_load import load_run as synthetic_load_run
from tests.unit.store.test_export import odd_run

INTERVAL = ("interval_low", "interval_high", "interval_confidence", "interval_method")


def export(run, fmt, out):
    result = CliRunner().invoke(app, ["export", str(run), "--format", fmt, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output


def read_back(out, fmt) -> list[dict]:
    """The claims table's rows, typed as export.json says (CSV: an empty cell is null)."""
    if fmt == "parquet":
        return pq.read_table(out / "claims.parquet").to_pylist()
    manifest = json.loads((out / "export.json").read_text())
    (table,) = [t for t in manifest["tables"] if t["name"] == "claims"]
    floats = {c["name"] for c in table["columns"] if c["type"] == "float64"}
    with open(out / "claims.csv", newline="") as handle:
        return [
            {k: None if v == "" else float(v) if k in floats else v for k, v in row.items()}
            for row in csv.DictReader(handle)
        ]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_every_claim_is_exported_with_its_interval(tmp_path, fmt):
    run = synthetic_load_run(tmp_path / "runs")
    output = export(run, fmt, tmp_path / "out")
    claims = compute_claims(load_run(run))
    assert f"claims.{fmt}: {len(claims):,} rows" in output
    rows = read_back(tmp_path / "out", fmt)
    assert [r["name"] for r in rows] == [c.name for c in claims]
    with_interval = 0
    for row, claim in zip(rows, claims):
        assert (row["printed"], row["unit"] or "", row["kind"], row["direction"]) == (  # CSV: "" reads as null
            claim.printed,
            claim.unit,
            claim.kind,
            claim.direction,
        ), claim.name
        if isinstance(claim.value, (bool, str)):
            assert row["value"] is None
        else:
            assert row["value"] == float(claim.value), claim.name
        if claim.interval is None:
            assert [row[k] for k in INTERVAL] == [None] * 4, claim.name
        else:
            with_interval += 1
            i = claim.interval
            assert [row[k] for k in INTERVAL] == [i.low, i.high, i.confidence, i.method], claim.name  # exact
    assert with_interval >= 10
    by_name = {r["name"]: r for r in rows}
    assert by_name["load.ttft_s.p99"]["interval_low"] is None  # 60 values: too few for a p99's interval
    assert by_name["load.ttft_s.p50"]["interval_method"].startswith("order statistics")


def test_export_json_describes_the_interval_columns(tmp_path):
    export(synthetic_load_run(tmp_path / "runs"), "csv", tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    (table,) = [t for t in manifest["tables"] if t["name"] == "claims"]
    columns = {c["name"]: c for c in table["columns"]}
    assert [columns[k]["type"] for k in INTERVAL] == ["float64", "float64", "float64", "string"]
    assert columns["interval_low"]["unit"] == "the claim's unit"
    assert table["file"] == "claims.csv" and table["rows"] > 0


def test_a_run_whose_claims_cannot_be_computed_still_exports_its_data(tmp_path):
    run = odd_run(tmp_path)
    output = export(run, "csv", tmp_path / "out")
    assert "requests.csv: 2 rows" in output and "claims.csv: 0 rows" in output
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    (table,) = [t for t in manifest["tables"] if t["name"] == "claims"]
    assert table["description"].startswith("none: the run's claims cannot be computed")
    assert (tmp_path / "out" / "claims.csv").read_text().splitlines()[0].startswith("name,value,printed")
