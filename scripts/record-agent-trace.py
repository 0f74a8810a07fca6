#!/usr/bin/env python3
"""Records a small openai-agents SDK run as OpenTelemetry spans in OTLP JSON, for `loadproof run replay --format otel`.

usage: scripts/in-venv python scripts/record-agent-trace.py --base-url http://127.0.0.1:8013/v1 --out DIR

The agent: an orchestrator (a shop assistant with long standing instructions) asks a sub-agent, the stock clerk
(`Agent.as_tool`, with instructions of its own), about two items at once; each clerk calls the function tool
`lookup_inventory`, which takes a fixed 0.25 s; the orchestrator then answers. Six chat calls: the orchestrator's
first, each clerk's two (around its tool call), the orchestrator's last, which joins both clerks. Its spans are
exported by two instrumentations at once, each to its own file of OTLP JSON (one ExportTraceServiceRequest a
line, written by opentelemetry-exporter-otlp-json-file): DIR/agent-trace.genai.jsonl by
opentelemetry-instrumentation-openai-agents-v2 (the GenAI semantic conventions, `gen_ai.*`) and
DIR/agent-trace.openinference.jsonl by openinference-instrumentation-openai-agents (`llm.*`).

The model is any OpenAI-compatible chat endpoint. The embedded engine's Gemma 3 270M does not follow tool schemas,
so by default a turn that is to call a tool is decoded under a regex (vLLM's `structured_outputs`) spelling the
hermes tool calls, which the engine's hermes parser returns as real `tool_calls` (`loadproof serve embedded-tools`
has that parser); `--free-tool-calls` leaves a capable model to call the tools itself. Nothing is sent anywhere
but --base-url: the SDK's own trace upload to OpenAI is switched off. Needs the test extra's agent packages
(pyproject.toml). The text in the trace is the instructions below, the question, and the model's answers.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import agents
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic import BaseModel, Field

TOOL_S = 0.25  # lookup_inventory's recorded duration: the think time a replay keeps
QUESTION = "Do we have enough blue widgets and red gears for the Saturday sale?"
# the forced tool calls' arguments (regexes): the orchestrator asks the clerk about each item, both at once; the
# clerk looks up a name of its own choosing
FORCED = {"ask_stock_clerk": ["blue widgets", "red gears"], "lookup_inventory": ["[A-Za-z ]{1,24}"]}

ORCHESTRATOR = """You are the shop floor assistant of Harbour Street Hardware, a family-run store that sells tools,
fasteners, paint, garden supplies and small machine parts to trade customers and to the public. You help the
staff on the shop floor: cashiers, the stock room team, the delivery drivers and the weekend temporary workers.

How you work:
1. Read the member of staff's question carefully and decide which facts you need before you can answer it.
2. Never guess a stock level, a price, a delivery date or a supplier. Stock levels come only from the stock clerk,
   whom you reach through the ask_stock_clerk tool. Ask the clerk one short question for each item named, and
   ask about all the items at once rather than one after another, so the staff member is not kept waiting.
3. When the clerk has answered, combine the answers into one short reply. Name each item, the number of units
   the clerk reported and the warehouse that holds them. If an item is missing or the clerk could not find it,
   say so plainly and suggest that the staff member checks the back room or calls the supplier.
4. Keep replies short: two or three sentences. Staff read them on a small handheld screen while they serve
   customers, so put the most important fact first and leave out greetings and sign-offs.

Store rules you must respect:
- Opening hours are eight in the morning to six in the evening from Monday to Saturday, and ten to four on
  Sunday. Deliveries leave the yard at nine and at two on weekdays only.
- A sale item may be held for a customer for at most twenty-four hours, and only with a deposit.
- Trade customers with an account receive their discount at the till; you never quote discounts yourself.
- Paint is mixed to order and cannot be returned. Power tools may be returned within thirty days, unused,
  with the receipt. Fasteners sold by weight are never returned.
- Questions about wages, rotas, holidays or anything personal go to the shop manager, not to you.
- Safety comes first: if a question concerns an injury, a spill of chemicals, a fire or a gas smell, tell the
  staff member to follow the emergency card by the till and to call the manager at once.

Tone: friendly, calm and exact. Use plain words, whole numbers and the item names the staff member used. If
the question is not about the shop, say briefly that you can only help with the shop's work."""

CLERK = """You are the stock clerk of Harbour Street Hardware. You answer questions about how many units of an item
the store holds and where they are kept. The inventory system is reached only through the lookup_inventory tool:
call it once with the item's name exactly as it was asked, then answer from what it returns.

Rules for your answers:
- Report the number of units and the warehouse, in one sentence, for example: twelve units in the north
  warehouse. Never invent a number the tool did not return, and never round it.
- If the tool returns no units, say that the item is out of stock and that a reorder may be pending.
- Do not discuss prices, discounts, suppliers or delivery dates: the assistant who asked you handles those.
- Keep the item name the way the assistant wrote it, so that the assistant can match your answer to the
  question. Answer in English, without greetings, lists or explanations of how you found the number.

The store has two warehouses, north and south, and a small back room behind the tills. Counts are updated every
night at closing time, so a number may be a few hours old during the day. Items on a pallet that has been
delivered but not yet unpacked are counted in the warehouse that received it. Items held for a customer with a
deposit are not counted at all, and neither are items returned by a customer until the stock room has checked
them. Fasteners sold by weight are counted in boxes of one kilogram, paint in tins of any size, and timber in
lengths of two metres. If the assistant names an item the store does not sell, say that the item is not in the
catalogue rather than that it is out of stock."""


class StockQuestion(BaseModel):
    question: str = Field(max_length=40)  # bounded: a strict tool grammar then closes the string


@function_tool
async def lookup_inventory(item: Annotated[str, Field(max_length=24)]) -> str:
    """Look up how many units of an item are in the warehouse."""
    await asyncio.sleep(TOOL_S)  # the inventory system's fixed latency, recorded as the tool span's duration
    return json.dumps({"item": item, "units": 42, "warehouse": "north"})


class ForcedToolCallModel(OpenAIChatCompletionsModel):
    """A turn that is to call a tool (its agent has tools and no tool result yet) is decoded under a regex that
    spells hermes tool calls of the agent's first tool, one for each of `arguments[tool]` (a regex of the one
    argument's value); any later turn is free text without tools (tool_choice none). Gemma 3 270M on vLLM 0.32
    CPU answered tool_choice required (even with strict, bounded schemas) with unparsable text cut at max_tokens;
    the tools must not be strict, as vLLM decodes a strict tool under a grammar of its own that overrides the
    regex (and allowed one call only)."""

    def __init__(self, *args: Any, arguments: dict[str, list[str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments = arguments

    async def get_response(self, system_instructions, input, model_settings, tools, *args, **kwargs):
        items = input if isinstance(input, list) else []
        answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
        if tools and not answered:
            tool = tools[0]
            param = next(iter(tool.params_json_schema["properties"]))
            calls = [
                '<tool_call>\\n\\{"name": "' + tool.name + '", "arguments": \\{"' + param + '": "' + value + '"\\}\\}'
                "\\n</tool_call>"
                for value in self.arguments[tool.name]
            ]
            model_settings = dataclasses.replace(
                model_settings, tool_choice="auto", max_tokens=64 * len(calls),
                extra_body={"structured_outputs": {"regex": "\\n".join(calls)}},
            )  # fmt: skip
        else:
            model_settings = dataclasses.replace(model_settings, tool_choice="none")
        return await super().get_response(system_instructions, input, model_settings, tools, *args, **kwargs)


def provider(path: Path, name: str) -> TracerProvider:
    path.unlink(missing_ok=True)
    tracer_provider = TracerProvider(
        resource=Resource.create({"service.name": "loadproof-agent-trace", "loadproof.instrumentation": name})
    )
    tracer_provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(path=str(path))))
    return tracer_provider


async def record(base_url: str, model_name: str, out: Path, max_tokens: int, forced: bool) -> dict[str, Any]:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor as OpenInference
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor as GenAI

    out.mkdir(parents=True, exist_ok=True)
    paths = {"genai": out / "agent-trace.genai.jsonl", "openinference": out / "agent-trace.openinference.jsonl"}
    providers = {name: provider(path, name) for name, path in paths.items()}
    agents.set_trace_processors([])  # no upload to OpenAI's trace service; the instrumentations add their own
    OpenInference().instrument(tracer_provider=providers["openinference"], exclusive_processor=False)
    server = urlsplit(base_url)
    GenAI().instrument(
        tracer_provider=providers["genai"],
        capture_message_content="span_only",  # the messages the replay sizes and shares, on the chat spans
        base_url=base_url, server_address=server.hostname, server_port=server.port,
    )  # fmt: skip

    client = AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0)
    model: OpenAIChatCompletionsModel = (
        ForcedToolCallModel(model=model_name, openai_client=client, arguments=FORCED)
        if forced
        else OpenAIChatCompletionsModel(model=model_name, openai_client=client)
    )
    settings = ModelSettings(max_tokens=max_tokens, temperature=0.0)
    clerk = Agent(
        name="stock_clerk", instructions=CLERK, tools=[lookup_inventory], model=model, model_settings=settings
    )
    ask = clerk.as_tool(
        tool_name="ask_stock_clerk", tool_description="Ask the stock clerk about one item.", parameters=StockQuestion
    )
    if forced:  # see ForcedToolCallModel
        for tool in (lookup_inventory, ask):
            tool.strict_json_schema = False
    orchestrator = Agent(
        name="orchestrator", instructions=ORCHESTRATOR, tools=[ask], model=model, model_settings=settings
    )
    started = time.monotonic()
    try:
        with agents.trace("loadproof: an orchestrator asking a sub-agent about two items"):
            result = await Runner.run(orchestrator, QUESTION, max_turns=4)
    finally:
        await client.close()
        for tracer_provider in providers.values():
            tracer_provider.shutdown()  # flushes the batch to the file
    return {
        "seconds": round(time.monotonic() - started, 2),
        "answer": str(result.final_output),
        "files": {name: str(path) for name, path in paths.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="the chat endpoint's base, e.g. http://127.0.0.1:8013/v1")
    parser.add_argument("--model", default="gemma-3-270m", help="the served model name")
    parser.add_argument("--out", type=Path, required=True, help="folder for the two .jsonl files")
    parser.add_argument("--max-tokens", type=int, default=48, help="each answer's max_tokens")
    parser.add_argument("--free-tool-calls", action="store_true", help="let the model call the tools itself")
    args = parser.parse_args()
    done = asyncio.run(record(args.base_url, args.model, args.out, args.max_tokens, not args.free_tool_calls))
    print(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
