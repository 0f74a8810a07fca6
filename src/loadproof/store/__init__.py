"""The run directory: an append-only record of one run (docs/architecture.md, 'The run directory')."""

from loadproof.store.run_dir import Run, RunWriter, load_run, new_run_id

__all__ = ["Run", "RunWriter", "load_run", "new_run_id"]
