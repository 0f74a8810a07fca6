"""`verify` needs no client, tokenizer, model, web server or CLI library: proved in a subprocess where
those cannot be imported, on a bundle of every kind the repository publishes (tests/bundles.py), records
compressed as publish stores them, and one copied with its records plain, as older bundles hold them.

The CLI (`loadproof verify`) itself needs typer and rich; the library path `loadproof.verify.verify()`
needs neither, and this test blocks them too. What the pure side may import is standard library, msgspec
and zstandard (a bundle's records are compressed), which stays importable here
(tests/unit/test_layers.py checks the imports).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import bundles as sample

ROOT = Path(__file__).resolve().parents[3]
BLOCKED = ("aiohttp", "tokenizers", "pydantic", "starlette", "uvicorn", "typer", "rich", "prometheus_client", "PIL")

SCRIPT = r"""
import json, sys
blocked = tuple(json.loads(sys.argv[1]))
already = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
assert not already, already


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"blocked for this test: {name}")
        return None


sys.meta_path.insert(0, Refuse())
for name in blocked:  # the blocker works: each of them really cannot be imported
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(f"{name} imported despite the blocker")

import loadproof.verify
from pathlib import Path

loaded = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
assert not loaded, f"import loadproof.verify loaded {loaded}"

from loadproof.metrics import claim_functions

for scenario in claim_functions.names():  # every claim definition, not only those the bundles use
    claim_functions.get(scenario)

bundles = [Path(p) for p in json.loads(sys.argv[2])]
for bundle in bundles:
    result = loadproof.verify.verify(bundle)
    print(bundle.name, result.summary())
    assert result.ok, result.lines()[:5]
loaded = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
assert not loaded, f"verifying loaded {loaded}"
print(f"isolated: {len(bundles)} bundles")
"""


def test_every_kind_of_repository_bundle_verifies_without_client_tokenizer_or_web_libraries(tmp_path):
    plain = sample.plain_copy(sample.bundles()[0], tmp_path / "plain")
    bundles = [str(b) for b in sample.bundles()] + [str(plain)]
    assert len(bundles) >= 10
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(BLOCKED), json.dumps(bundles)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert f"isolated: {len(bundles)} bundles" in done.stdout
    assert done.stdout.count("VERIFIED") == len(bundles)
