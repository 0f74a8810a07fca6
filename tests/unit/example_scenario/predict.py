"""How the simulator predicts the example scenario (its catalog entry's `predict`): `plan SIM --simulate
example`, and with `--prediction-out FILE` a contract `run example --prediction FILE` is judged against.

R rounds of N requests, one at a time, each the prompt (as many tokens as the simulator's byte tokenizer
counts) and `max_tokens` out, sent on the virtual clock; the predicted run's claims are the scenario's own
(`metrics.claims_of_run`), so the ranges and the contract read them by the names `metrics.CONTRACT` lists.
"""

from __future__ import annotations

from typing import Any

from loadproof.metrics.claims import Claim
from loadproof.predict.base import Predictor, Show, with_defaults
from loadproof.predict.virtual import open_loop, predicted_run
from loadproof.scenarios.options import CliOption, cli_options, from_cli
from loadproof.sim.config import CostModel, SimConfig
from loadproof.sim.text import count_tokens
from tests.unit.example_scenario.metrics import claims_of_run
from tests.unit.example_scenario.plan import ExamplePlan
from tests.unit.example_scenario.scenario import ExampleOptions, ExampleScenario

# the tests' sim profile: steps of 50 ms, long beside HTTP, so a run on the simulator in real time (time scale 1)
# measures what its prediction says: a TTFT of 70 ms (one step, 20 prompt tokens at 1 ms), 51 ms a token after
TESTS_PROFILE = SimConfig(
    max_model_len=4096,
    num_gpu_blocks=1024,
    cost=CostModel(step_overhead_s=0.05, prefill_s_per_token=0.001, decode_s_per_seq=0.001),
)


class ExamplePredictor(Predictor[ExampleOptions]):
    contract_options = ("requests", "rounds", "max_tokens", "prompt")  # every option shapes the requests

    def cli_options(self) -> list[CliOption]:
        return cli_options(ExampleOptions)

    def question(self, values: dict[str, Any], source: str) -> ExampleOptions:
        return from_cli(ExampleOptions, with_defaults(self.cli_options(), values), source)

    def claims(self, config: SimConfig, question: ExampleOptions) -> list[Claim]:
        rounds = [[f"ex-{r}-{i}" for i in range(question.requests)] for r in range(question.rounds)]
        n = question.requests * question.rounds
        sent = open_loop(
            config,
            [0.0] * n,
            [count_tokens(question.prompt)] * n,
            [question.max_tokens] * n,
            scenario=ExampleScenario.name,
            max_concurrency=1,  # one at a time, as the scenario sends them
        )
        for record, request_id in zip(sent.records, [i for ids in rounds for i in ids]):
            record.request_id, record.repeat = request_id, int(request_id.split("-")[1])
        plan = ExamplePlan(prompt=question.prompt, max_tokens=question.max_tokens, rounds=rounds)
        return claims_of_run(predicted_run(ExampleScenario.name, sent.records), plan)

    def forecast(self, config: SimConfig, question: ExampleOptions, show: Show) -> None:
        claims = self.claims(config, question)
        show.table(
            f"Predicted example: {question.rounds} round(s) of {question.requests} request(s)",
            ["figure", "value", "unit"],
            [[c.name, c.printed, c.unit] for c in claims],
        )

    def options_of(self, question: ExampleOptions) -> dict[str, Any]:
        return question.model_dump(mode="json")


PREDICTOR = ExamplePredictor()
