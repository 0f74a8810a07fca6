"""`loadproof profiles`: the packaged profiles, one a line, by name with its description. Every command that
takes a profile takes one of these names as well as a file (`config.profile.resolve_profile`)."""

from __future__ import annotations

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.config.profile import packaged_listing


@app.command()
def profiles() -> None:
    """List the packaged profiles: give a name wherever a PROFILE (or --profile) is taken."""
    listed = packaged_listing()
    width = max(len(name) for name, _ in listed)
    for name, description in listed:
        ui.out.print(f"{name.ljust(width)}  {description}".rstrip(), markup=False, highlight=False, soft_wrap=True)
