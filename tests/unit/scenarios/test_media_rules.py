"""Where a load run's media rules come from, and what a run of media alone needs (issue #39): `run load --profile
P` takes the profile's `[model] image_tokens`/`audio_tokens` for a kind `--media-tokens` gives no rule of (given
rules win), and its plan's media say where each came from; `plan PROFILE --simulate load` charges the same rules;
a transcription (a route that takes no text) asks for no tokenizer and no engine /tokenize, and plans with none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadproof.config.profile import resolve_profile
from loadproof.predict.deployment import media_tokens_of
from loadproof.predict.load import predict_load_sweep, rate_sweep
from loadproof.protocol.routes import route_of
from loadproof.scenarios.lifecycle import check
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.scenario import LoadScenario
from loadproof.scenarios.load.synthetic import media_plan
from loadproof.scenarios.long_context import EXACT_LENGTH
from loadproof.scenarios.media_options import with_profile_rules
from loadproof.scenarios.target import Target
from loadproof.sim.config import SimConfig
from loadproof.workloads.media import media_tokens_text

VLM = resolve_profile("embedded-vlm")  # [model] image_tokens = "fixed:64+3"
ASR = resolve_profile("embedded-asr")  # [model] audio_tokens = "per_s:100+4"


def options(**values: Any) -> LoadOptions:
    return LoadOptions.model_validate({"rate": 2, "num_requests": 4, **values})


def test_the_profiles_image_rule_when_media_tokens_gives_none_and_the_plan_says_so():
    opts = with_profile_rules(options(images="1:224x224"), VLM, dataset=False)
    assert media_tokens_text(opts.media_tokens or ()) == "fixed:64+3"
    assert opts.media_tokens is not None and opts.media_tokens[0].image(224, 224) == 67
    plan = media_plan(opts)
    assert (plan.tokens, plan.tokens_source) == ("fixed:64+3", "profile embedded-vlm [model] image_tokens")
    assert "tokens_source" not in plan.key()  # where a rule came from is no part of the workload
    # a sweep's point or a search's trial keeps both
    one = opts.one_run(4.0)
    assert one.media_tokens == opts.media_tokens and one.media_tokens_from == opts.media_tokens_from


def test_media_tokens_wins_and_fills_no_kind_it_gives():
    given = options(images="1:224x224", media_tokens="patches:28")
    assert with_profile_rules(given, VLM, dataset=False) is given
    assert media_plan(given).tokens_source == "--media-tokens"
    # --media-tokens gives the audio rule; the profile's image rule fills the kind it left out
    both = VLM.model_copy(update={"model": VLM.model.model_copy(update={"audio_tokens": "per_s:25"})})
    opts = with_profile_rules(options(images="1:224x224", audio_s=1.0, media_tokens="per_s:50"), both, dataset=False)
    assert media_tokens_text(opts.media_tokens or ()) == "per_s:50,fixed:64+3"
    assert media_plan(opts).tokens_source == "--media-tokens, profile embedded-vlm [model] image_tokens"


def test_no_media_no_profile_rule_or_no_profile_leaves_the_options_as_given():
    for opts, profile in (
        (options(), VLM),  # no media: no rule to fill (--media-tokens alone is refused)
        (options(audio_s=2.0), VLM),  # the profile states no audio rule
        (options(images="1:64x64"), ASR),  # nor an image rule here
        (options(images="1:64x64"), None),
    ):
        assert with_profile_rules(opts, profile, dataset=False) is opts
        assert media_plan(opts).tokens_source == ""
    # a data set's media are known only once read: every rule the profile states
    assert with_profile_rules(options(), VLM, dataset=True).media_tokens_from == (
        "profile embedded-vlm [model] image_tokens"
    )


def test_a_transcription_of_synthetic_audio_needs_no_tokenizer():
    route = route_of("transcriptions")
    assert not route.takes_text and route_of("chat").takes_text
    assert LoadScenario.tokenizer_use(options(audio_s=2.0), route) is None
    assert LoadScenario.tokenizer_use(options(images="1:64x64"), route_of("chat")) is EXACT_LENGTH
    assert LoadScenario.tokenizer_use(options(), route_of("completions")) is EXACT_LENGTH
    # the colleague's command: no --tokenizer, and the resolution will not ask the engine's /tokenize
    values = {"url": "http://127.0.0.1:9", "profile": "embedded-asr", "endpoint": "transcriptions"}
    checked = check(LoadScenario, {**values, "audio_s": 2.0, "rate": "1", "num_requests": 4})
    assert checked.tokenizer is None


def test_a_transcription_plans_without_any_token_source(tmp_path: Path):
    """No tokenizer, no /tokenize (the target answered none): the plan holds the files and no overhead."""
    target = Target(url="http://127.0.0.1:9", model="whisper-tiny", endpoint="transcriptions")
    assert target.tokenizer_source is None
    opts = with_profile_rules(options(audio_s=2.0), ASR, dataset=False)
    plan, requests = LoadScenario(target, opts).plan()
    assert plan.input_tokens.kind == "none" and plan.overhead_tokens is None and plan.overhead_source is None
    assert plan.media is not None and plan.media.media_alone
    assert (plan.media.tokens, plan.media.tokens_source) == ("per_s:100+4", "profile embedded-asr [model] audio_tokens")
    assert len(requests) == 4 and all(r.input_tokens is None for r in requests)
    assert all(r.media is not None and r.media.tokens == 204 for r in requests)  # 2 s x 100 + the decoder's 4


def test_a_deployment_profiles_rules_are_charged_by_the_prediction():
    base = SimConfig(image_tokens="fixed:64", audio_tokens="per_s:50")
    config = base.model_copy(update=media_tokens_of(VLM, base))
    assert config.image_tokens == "fixed:64+3" and config.audio_tokens == "per_s:50"
    assert config.media_tokens_from == {"image_tokens": "profile embedded-vlm [model] image_tokens"}
    assert "media_tokens_from" not in config.model_dump()  # never written into a sim profile
    assert media_tokens_of(resolve_profile("sim-small"), base) == {}  # a profile that states none
    values = {"rate": "1", "num_requests": 5, "input_tokens": "64", "output_tokens": "4", "endpoint": "chat"}
    run = predict_load_sweep(config, rate_sweep({**values, "images": "1:224x224"})).rates[0].run
    assert run.media is not None and run.media.tokens == 67
    assert str(run.media.image) == "fixed:64+3 (profile embedded-vlm [model] image_tokens)"
    given = predict_load_sweep(config, rate_sweep({**values, "images": "1:224x224", "media_tokens": "fixed:10"}))
    media = given.rates[0].run.media
    assert media is not None and media.tokens == 10
    assert str(media.image) == "fixed:10 (--media-tokens; profile embedded-vlm [model] image_tokens states fixed:64+3)"
