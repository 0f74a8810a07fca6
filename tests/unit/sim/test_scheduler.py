"""The simulator's scheduler: vLLM v1's policy and the invariants every step must keep."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loadproof.predict.virtual import salted_hashes
from loadproof.sim.config import CostModel, SimConfig
from loadproof.sim.scheduler import Scheduler, SimRequest


def config(**kw) -> SimConfig:
    base = dict(
        max_model_len=4096,
        block_size=16,
        num_gpu_blocks=64,
        max_num_seqs=8,
        max_num_batched_tokens=256,
        cost=CostModel(step_overhead_s=0.01, prefill_s_per_token=1e-4, decode_s_per_seq=1e-3),
    )
    base.update(kw)
    return SimConfig(**base)


def request(rid: str, prompt: int, max_tokens: int = 8, salt: str | None = None, bs: int = 16) -> SimRequest:
    return SimRequest(rid, prompt, max_tokens, salted_hashes(salt or rid, prompt, bs))


def run_steps(s: Scheduler, limit: int = 10_000) -> list[tuple[str, bool]]:
    """Step until idle; (request id, first token?) per emitted token, in order."""
    out, now = [], 0.0
    for _ in range(limit):
        step = s.schedule()
        if step is None:
            break
        now += s.step_duration_s(step)
        out += [(e.request.request_id, e.first) for e in s.complete(step, now)]
    return out


def test_long_prompts_prefill_one_at_a_time_in_arrival_order():
    s = Scheduler(config(num_gpu_blocks=1000))
    for rid in ("a", "b", "c"):
        s.add(request(rid, 1000, max_tokens=4))
    first = s.schedule()
    assert [(r.request_id, n) for r, n in first.scheduled] == [("a", 256)]  # the head takes the whole budget
    s.complete(first, 1.0)
    second = s.schedule()
    assert [(r.request_id, n) for r, n in second.scheduled] == [("a", 256)]
    firsts = [rid for rid, is_first in run_steps(s) if is_first]
    assert firsts == ["a", "b", "c"]


def test_the_head_chunk_leaves_its_remainder_to_the_next_prompt():
    s = Scheduler(config(num_gpu_blocks=1000))
    s.add(request("a", 300, max_tokens=4))
    s.add(request("b", 300, max_tokens=4))
    s.complete(s.schedule(), 1.0)  # a: 256
    step = s.schedule()
    assert [(r.request_id, n) for r, n in step.scheduled] == [("a", 44), ("b", 212)]


def test_decodes_take_one_token_each_before_new_prefill():
    s = Scheduler(config(num_gpu_blocks=1000))
    s.add(request("a", 100, max_tokens=50))
    s.complete(s.schedule(), 1.0)
    s.add(request("b", 1000, max_tokens=4))
    step = s.schedule()
    assert [(r.request_id, n) for r, n in step.scheduled] == [("a", 1), ("b", 255)]
    assert step.decode_contexts == [101] and step.prefill_chunks == [(0, 255)]


def test_max_num_seqs_holds_the_rest_waiting():
    s = Scheduler(config(max_num_seqs=2, num_gpu_blocks=1000))
    for rid in "abc":
        s.add(request(rid, 32, max_tokens=100))
    s.complete(s.schedule(), 1.0)
    assert [r.request_id for r in s.running] == ["a", "b"] and [r.request_id for r in s.waiting] == ["c"]


def test_reserve_full_sequence_blocks_the_head_and_everyone_behind_it():
    s = Scheduler(config(num_gpu_blocks=20))  # 320 tokens
    s.add(request("a", 200, max_tokens=100))
    s.complete(s.schedule(), 1.0)
    s.add(request("big", 200))  # needs 13 blocks, 6 free after a's 13 + growth
    s.add(request("small", 16))  # would fit, but FIFO: not before "big"
    s.schedule()
    assert [r.request_id for r in s.waiting] == ["big", "small"]


def test_kv_exhaustion_preempts_the_latest_admitted_and_it_recomputes():
    s = Scheduler(config(num_gpu_blocks=12, reserve_full_sequence=False))  # 192 tokens
    s.add(request("old", 80, max_tokens=100))  # 180 tokens each: one fits, two do not
    s.add(request("new", 80, max_tokens=100))
    emitted = run_steps(s)
    assert s.counters.num_preemptions >= 1
    assert s.pool.num_free == 12 and not s.running and not s.waiting
    new_firsts = [i for i, (rid, first) in enumerate(emitted) if rid == "new" and first]
    assert len(new_firsts) == 1  # a recomputed request does not emit a second "first" token


def test_abort_frees_blocks_at_once():
    s = Scheduler(config(num_gpu_blocks=100))
    s.add(request("a", 300, max_tokens=100))
    s.complete(s.schedule(), 1.0)
    assert s.pool.num_free < 100
    assert s.abort("a")
    assert s.pool.num_free == 100 and not s.running and s.counters.finished["abort"] == 1
    assert not s.abort("a")


def test_prefix_cache_hits_on_the_same_prompt_and_none_with_another_salt():
    s = Scheduler(config(num_gpu_blocks=200))
    s.add(request("a", 500, max_tokens=2, salt="same"))
    run_steps(s)
    s.add(request("b", 500, max_tokens=2, salt="same"))
    run_steps(s)
    assert s.counters.prefix_cache_hits == 496  # 31 full blocks; the last token is always recomputed
    s.add(request("c", 500, max_tokens=2, salt="other"))
    run_steps(s)
    assert s.counters.prefix_cache_hits == 496


def test_a_finished_prompt_fully_cached_still_computes_one_token():
    s = Scheduler(config(num_gpu_blocks=200))
    s.add(request("a", 64, max_tokens=1, salt="x"))
    run_steps(s)
    s.add(request("b", 64, max_tokens=1, salt="x"))
    step = s.schedule()
    assert [(r.request_id, n) for r, n in step.scheduled] == [("b", 16)]  # 3 of 4 blocks hit


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 600), st.integers(1, 40), st.integers(0, 3)),
        st.tuples(st.just("abort"), st.integers(0, 30)),
        st.tuples(st.just("step"), st.integers(1, 6)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    ops=ops,
    blocks=st.integers(8, 80),
    budget=st.integers(16, 512),
    seqs=st.integers(1, 6),
    reserve=st.booleans(),
    threshold=st.sampled_from([0, 64]),
)
def test_invariants_hold_under_any_sequence(ops, blocks, budget, seqs, reserve, threshold):
    cfg = config(
        num_gpu_blocks=blocks,
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        reserve_full_sequence=reserve,
        long_prefill_token_threshold=threshold,
        max_model_len=2048,
    )
    s = Scheduler(cfg)
    added: list[str] = []
    first_admission: list[str] = []
    aborted: set[str] = set()
    now = 0.0
    for op in ops:
        if op[0] == "add":
            _, prompt, max_tokens, salt = op
            rid = f"r{len(added)}"
            s.add(request(rid, prompt, max_tokens, salt=f"s{salt}"))  # shared salts: prefix-cache hits happen
            added.append(rid)
        elif op[0] == "abort" and added:
            rid = added[op[1] % len(added)]
            if s.abort(rid):
                aborted.add(rid)
        else:
            for _ in range(op[1]):
                step = s.schedule()
                if step is None:
                    break
                assert sum(n for _, n in step.scheduled) <= budget
                assert len(s.running) <= seqs
                for r, _ in step.scheduled:
                    if r.request_id not in first_admission:
                        first_admission.append(r.request_id)
                now += s.step_duration_s(step)
                s.complete(step, now)
        # never more resident tokens than the budget; every block is either free or referenced
        held = {b for r in s.running for b in r.block_ids}
        assert len(held) + s.pool.num_free == blocks
        assert s.resident_tokens() <= blocks * cfg.block_size
        assert all(b.ref_count >= 0 for b in s.pool.blocks)
        assert not any(r.block_ids for r in s.waiting)
    # FIFO: requests are first admitted in arrival order (aborted ones may drop out)
    order = [rid for rid in added if rid in first_admission]
    assert first_admission == order
    # aborting everything frees every block
    for rid in added:
        s.abort(rid)
    assert s.pool.num_free == blocks and not s.running and not s.waiting


def step_times(jitter: float, seed: int, steps: int = 400) -> list[float]:
    """The durations of `steps` decode steps of the same batch (one long request decoding)."""
    s = Scheduler(config(step_jitter=jitter, seed=seed, num_gpu_blocks=1000))
    s.add(request("a", 16, max_tokens=steps + 1))
    out, now = [], 0.0
    for _ in range(steps):
        step = s.schedule()
        out.append(s.step_duration_s(step))
        now += out[-1]
        s.complete(step, now)
    return out


def test_step_jitter_spreads_each_steps_time_around_the_cost_models_from_the_seed():
    plain = step_times(0.0, 1)
    decode = plain[-1]
    assert all(t == decode for t in plain[1:])  # the cost model alone: one value for the same batch
    jittered = step_times(0.05, 1)
    assert jittered == step_times(0.05, 1)  # the seed's draws
    assert jittered != step_times(0.05, 2)
    ratios = [t / decode for t in jittered[1:]]
    mean = sum(ratios) / len(ratios)
    sd = (sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1)) ** 0.5
    assert abs(mean - 1.0) < 0.015  # mean 1: 3 standard errors of 399 draws of sd 0.05
    assert 0.04 < sd < 0.06
    assert len(set(ratios)) == len(ratios)  # no lattice
