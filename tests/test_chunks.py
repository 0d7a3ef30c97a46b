"""The chunk broker behind agent=vla, agent=remote and agent=openpi: which action of which chunk each
step plays, and when the policy is asked again."""

from __future__ import annotations

import numpy as np
import pytest

from vla.agents.chunks import ChunkBroker


class _Chunks:
    """A policy whose k-th prediction is the chunk [[10k], [10k+1], ...] (K rows of one dimension)."""

    def __init__(self, K: int) -> None:
        self.K, self.calls = K, 0

    def __call__(self) -> np.ndarray:
        k = self.calls
        self.calls += 1
        return (10.0 * k + np.arange(self.K, dtype=np.float64))[:, None]


def _play(broker: ChunkBroker, policy, steps: int) -> list[float]:
    return [float(broker(policy)[0]) for _ in range(steps)]


def test_chunks_are_played_to_their_end_then_the_policy_is_asked_again():
    policy = _Chunks(3)
    assert _play(ChunkBroker(), policy, 7) == [0, 1, 2, 10, 11, 12, 20]
    assert policy.calls == 3


def test_replan_plays_the_first_n_actions_of_every_chunk():
    policy = _Chunks(8)
    assert _play(ChunkBroker(replan=3), policy, 7) == [0, 1, 2, 10, 11, 12, 20]
    assert policy.calls == 3
    policy = _Chunks(2)  # replan beyond the chunk: the whole chunk
    assert _play(ChunkBroker(replan=5), policy, 4) == [0, 1, 10, 11]


def test_ensemble_blends_the_overlapping_predictions_with_acts_weights():
    policy, m = _Chunks(3), 0.5
    broker = ChunkBroker(ensemble=m)
    got = _play(broker, policy, 4)
    w = np.exp(-m * np.arange(3))
    # step 2 sees chunk 0's row 2, chunk 1's row 1 and chunk 2's row 0 (oldest first)
    want2 = (w * np.array([2.0, 11.0, 20.0])).sum() / w.sum()
    want3 = (w * np.array([12.0, 21.0, 30.0])).sum() / w.sum()  # chunk 0 has run out
    assert got[0] == 0.0 and got[2] == pytest.approx(want2) and got[3] == pytest.approx(want3)
    assert policy.calls == 4


def test_a_single_action_passes_through_and_reset_drops_the_queue():
    broker = ChunkBroker()
    a = np.array([0.1, 0.2])
    assert broker(lambda: a) is a and broker.pending == 0
    policy = _Chunks(4)
    broker(policy)
    assert broker.pending == 3
    broker.reset()
    assert broker.pending == 0 and float(broker(policy)[0]) == 10.0


def test_bad_options_and_empty_chunks_are_refused():
    with pytest.raises(ValueError, match="replan"):
        ChunkBroker(replan=-1)
    with pytest.raises(ValueError, match="chunk"):
        ChunkBroker(ensemble=1.0)(lambda: np.zeros((0, 2)))


def test_asks_next_says_when_the_observation_will_be_read():
    """What the loop's render-on-demand relies on: the next call asks the policy (and reads its
    observation) exactly when no action of a chunk is left to play, or every step when ensembling."""
    chunk = np.arange(8.0).reshape(4, 2)
    for replan, asks in ((0, [True, False, False, False, True]), (2, [True, False, True, False, True])):
        broker, seen = ChunkBroker(replan=replan), []
        for _ in range(5):
            seen.append(broker.asks_next())
            calls = []
            broker(lambda: calls.append(1) or chunk)
            assert bool(calls) == seen[-1]  # it asked exactly when it said it would
        assert seen == asks
    ensemble = ChunkBroker(ensemble=0.5)
    for _ in range(3):
        assert ensemble.asks_next()
        ensemble(lambda: chunk)
