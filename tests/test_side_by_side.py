"""tfwb.tf.lab.side_by_side: alternating rounds of two configurations, decided by the sign test."""
import pytest

from tfwb import stats
from tfwb.config import RunConfig

interleave = pytest.importorskip("tfwb.tf.lab.side_by_side")


def test_rounds_alternate_which_configuration_goes_first():
    assert [interleave.round_order(i) for i in range(4)] == [(0, 1), (1, 0), (0, 1), (1, 0)]


@pytest.mark.parametrize("a, b, possible", [
    (RunConfig(), RunConfig(prefetch=True), True),
    (RunConfig(strategy="mirrored"), RunConfig(), False),
    (RunConfig(cache="/tmp/x"), RunConfig(cache="/tmp/x", prefetch=True), False),
    (RunConfig(cache="/tmp/x"), RunConfig(cache="/tmp/y"), True),
])
def test_warm_blocks_only_where_two_setups_can_share_a_process(a, b, possible):
    ok, why = interleave.can_warm_interleave(a, b)
    assert ok is possible and (why == "") is possible


def test_warm_true_where_impossible_raises():
    with pytest.raises(ValueError, match="warm=True is not possible"):
        interleave.compare_interleaved(RunConfig(strategy="mirrored"), RunConfig(), warm=True)
    with pytest.raises(ValueError, match="rounds"):
        interleave.compare_interleaved(RunConfig(), RunConfig(), rounds=0)


def test_a_short_interleaved_comparison_returns_paired_rounds(monkeypatch):
    cfg = RunConfig(data_source="memory", size="small", batch_size=16, warmup_steps=2)
    seen, calls = [], []
    real = interleave.timed_steps
    monkeypatch.setattr(interleave, "timed_steps",
                        lambda p, n, *a, **kw: calls.append((p.cfg.steps_per_execution, n)) or real(p, n, *a, **kw))
    asked = []
    cmp = interleave.compare_interleaved(cfg, cfg.replace(steps_per_execution=8), rounds=6, steps_per_round=2,
                                         progress=lambda done, total: seen.append((done, total)),
                                         stop_early=lambda b, c, n: asked.append((len(b), len(c), n)) or len(b) == 5)
    # Turns count steps, not calls: 1 settle step + 2 measured steps is 3 calls at 1 step a call, and one
    # call of 8 steps for each part at 8 steps a call (the same turn in calls was 24 steps).
    turns = {spe: [n for s_, n in calls if s_ == spe] for spe in (1, 8)}
    assert turns[1] == [2] + [3] * 6 and turns[8] == [1] + [2] * 6      # warm-up, the cold turn, 5 rounds
    assert isinstance(cmp, stats.RoundsComparison)
    # stop_early is asked after every round but the last, and ended the comparison after round 5 of 6
    assert asked == [(r, r, 6) for r in range(1, 6)]
    assert cmp.rounds == 5 and len(cmp.baseline_s) == len(cmp.candidate_s) == 5
    assert cmp.planned_rounds == 6 and cmp.stopped_early and cmp.method.endswith("stopped early after 5")
    assert all(t > 0 for t in cmp.baseline_s + cmp.candidate_s)
    assert cmp.verdict == stats.TOO_FEW_ROUNDS           # 5 rounds: fewer than the 6 a sign test decides on
    assert cmp.method.startswith("alternating warm blocks of 2 steps")
    assert seen[-1] == (5, 6) and len(seen) == 5
