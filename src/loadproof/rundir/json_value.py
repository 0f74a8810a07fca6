"""The open-ended parts of a run directory: JSON values whose shape the generic code does not read.

`JSONObject` is a JSON object as decoded (str keys; values None, bool, int, float, str, list or another
object). msgspec checks that it is an object and keeps it as it is; whoever reads into it owns its shape
(a scenario's resolved options, a profile, a plan before `plans.load_plan` types it).
"""

from __future__ import annotations

JSONValue = object  # None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]
JSONObject = dict[str, JSONValue]

__all__ = ["JSONObject", "JSONValue"]
