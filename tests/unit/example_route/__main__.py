"""`loadproof` with the echo route registered: `python -m tests.unit.example_route run load --endpoint echo ...`."""

from loadproof.protocol.routes import ROUTES
from tests.unit.example_route import NAME, TARGET

ROUTES.register(NAME, TARGET)  # before the CLI builds its options (`--endpoint` lists the routes)

from loadproof.cli import main  # noqa: E402  (after the registration, as above)

main()
