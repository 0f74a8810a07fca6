"""`loadproof` with the example scenario in its catalog: `python -m tests.unit.example_scenario run example ...`."""

from loadproof import catalog
from tests.unit.example_scenario import ENTRY, NAME

catalog.SCENARIOS[NAME] = ENTRY  # before the CLI builds its `run` commands from the catalog

from loadproof.cli import main  # noqa: E402  (after the entry, as above)

main()
