import pytest

from loadproof.errors import UsageError
from loadproof.registry import Registry


def test_lazy_lookup_collision_and_suggestion():
    reg: Registry[object] = Registry("widget")
    reg.register("throughput", "json:dumps")
    import json

    assert reg.get("throughput") is json.dumps
    with pytest.raises(ValueError, match="already registered"):
        reg.register("throughput", "json:loads")
    with pytest.raises(UsageError, match="did you mean 'throughput'"):
        reg.get("throughput2")
