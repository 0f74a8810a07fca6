"""A GPU whose name NVML refuses is a None in the manifest's telemetry names (the sampler's convention for a
refused reading); the run still reads back, and publish's provenance lists the names it has."""

from loadproof.publish.bundle import provenance
from loadproof.store.run_dir import RunWriter, load_run
from loadproof.telemetry import sampler


class RefusedName:
    """Two GPUs; NVML answered the second one's name only."""

    def __init__(self) -> None:
        self.handles = [object(), object()]
        self.names = [None, "NVIDIA H200"]
        self.driver = "570.86.15"
        self.energy_note = None


def test_a_refused_gpu_name_leaves_the_run_readable_and_publishable(tmp_path, monkeypatch):
    monkeypatch.setattr(sampler, "GPUSampler", RefusedName)
    described = sampler.TelemetrySampler(tmp_path / "telemetry.jsonl").describe()
    with RunWriter(tmp_path / "run") as writer:
        writer.write_manifest({"run_id": "run", "scenario": "load", "telemetry": described})
    manifest = load_run(tmp_path / "run").manifest
    assert manifest.telemetry is not None and manifest.telemetry.names == [None, "NVIDIA H200"]
    shown = provenance(manifest, None, torn=0)
    assert shown.gpu_models == ["NVIDIA H200"] and shown.num_gpus == 2
