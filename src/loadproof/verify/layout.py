"""Names inside a publication bundle, shared by `publish` (which writes them) and `verify` (which reads them).

    BUNDLE/
      bundle.json              format, versions, the runs and where each lies
      SHA256SUMS               sha256 of every other file, `sha256sum -c` format, sorted by path
      runs/<run_id>/           manifest.json, requests.jsonl, chunks.jsonl, metrics.jsonl, events.jsonl,
                               telemetry.jsonl, answers.jsonl (when the run has one), claims.json, report.md
"""

BUNDLE_JSON = "bundle.json"
SUMS = "SHA256SUMS"
RUNS_DIR = "runs"
FORMAT = "loadproof-bundle"
FORMAT_VERSION = 1
