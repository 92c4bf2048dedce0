"""StepPlan's running sums against a recount of the sequences it holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq
from simkv.engine.step_work import StepWork, chunk_attention_pairs


def _seq(i: int, prompt: int, computed: int, decoding: bool) -> Seq:
    """A request after ``computed`` prompt tokens (prefill), or decoding after its prompt and
    ``computed`` sampled tokens."""
    seq = Seq(i, 0.0, prompt, 10_000, 0, 16)
    if decoding:
        seq.num_output = computed + 1
        seq.num_tokens = prompt + computed + 1
        seq.num_computed = prompt + computed
    else:
        seq.num_computed = min(computed, prompt - 1)
    return seq


def _recount(plan: StepPlan) -> StepWork:
    prefill = decode = pairs = kv = prefill_kv = 0
    for seq, new in zip(plan.seqs, plan.num_new, strict=True):
        c = seq.num_computed
        if new == 1 and seq.num_output > 0 and c + 1 == seq.num_tokens:
            decode += 1
            kv += c + 1
        else:
            prefill += new
            pairs += chunk_attention_pairs(new, c)
            kv += c
            prefill_kv += c
    return StepWork(prefill, decode, pairs, kv, len(plan.seqs), prefill_kv)


ROWS = st.lists(
    st.tuples(st.integers(2, 3000), st.integers(0, 3000), st.booleans(), st.integers(1, 512)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(rows=ROWS, removed=st.lists(st.integers(0, 11), max_size=4, unique=True))
def test_plan_sums_match_a_recount_after_adds_and_removes(
    rows: list[tuple[int, int, bool, int]], removed: list[int]
) -> None:
    plan = StepPlan()
    seqs = []
    for i, (prompt, computed, decoding, chunk) in enumerate(rows):
        seq = _seq(i, prompt, computed, decoding)
        seqs.append(seq)
        plan.add(seq, 1 if decoding else min(chunk, seq.num_tokens - seq.num_computed))
    for i in removed:
        if i < len(seqs):
            plan.remove(seqs[i])
    assert plan.work() == _recount(plan)
    assert plan.work().prefill_kv_tokens <= plan.work().kv_read_tokens
