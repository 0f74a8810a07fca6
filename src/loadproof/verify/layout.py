"""Names inside a publication bundle, shared by `publish` (which writes them) and `verify` (which reads them),
and the caps verify applies to a bundle (docs/publish-and-verify.md, "What verify refuses").

    BUNDLE/
      bundle.json              format, versions, the runs and where each lies (typed: rundir.bundle.Bundle)
      SHA256SUMS               sha256 of every other file, `sha256sum -c` format, sorted by path
      series/<name>/           claims.json of a rate search (load.search.*), recomputed from its trial runs
      runs/<run_id>/           manifest.json, requests.jsonl, chunks.jsonl, metrics.jsonl, events.jsonl,
                               telemetry.jsonl, answers.jsonl (when the run has one), claims.json, report.md
"""

BUNDLE_JSON = "bundle.json"
SUMS = "SHA256SUMS"
RUNS_DIR = "runs"
SERIES_DIR = "series"  # a rate search's or sweep's own claims; bundle.json's `series` lists its trial runs

# Caps on what verify reads from a bundle (a stranger's files). The largest real bundle file under
# docs/runs is 3.6 MiB (chunks of a 64-session capacity run) with lines up to 59 KiB; a chunk row of a
# 128k-token answer is about 3 MiB. Past a cap a file is refused as TOO_LARGE, never read.
MAX_FILE_BYTES = 256 * 1024**2  # any one file
MAX_DOCUMENT_BYTES = (
    16 * 1024**2
)  # one JSON document: a JSONL line, manifest.json, claims.json, bundle.json; SHA256SUMS
MAX_BUNDLE_BYTES = 2 * 1024**3  # all files together
MAX_ENTRIES = 10_000  # files and folders in the bundle; runs in bundle.json; lines of SHA256SUMS
