"""KVCacheViewer and JacobiViewer: kernel-side state after hand-built records and real (tiny) runs."""
import numpy as np
import pytest
import torch

from lab.decode import generate
from lab.drafters import DraftModelDrafter, LookaheadDrafter
from lab.drafters.lookahead import JacobiRun, jacobi_decode
from lab.trace import StepRecord
from widgets.jacobi import JacobiViewer
from widgets.kv_viewer import KVCacheViewer

SCRIPT = "<script>alert(1)</script>"


class FakeTokenizer:
    def decode(self, ids):
        return "".join(SCRIPT if t == 0 else f"t{t}" for t in ids)


def kinds(slots):
    return [s["kind"] for s in slots]


def test_kv_viewer_frames_from_hand_built_records():
    viewer = KVCacheViewer(FakeTokenizer(), prompt_ids=[1, 2, 3])
    assert viewer.summary == "waiting for the first step" and viewer.rows == {}
    # step 0: cache holds [1, 2]; feeds [3] + drafts [4, 5, 6]; 1 accepted → keeps 2 of 4 written
    viewer(StepRecord(index=0, position=0, drafted=[4, 5, 6], num_accepted=1, emitted=[4, 9], last_kind="resampled",
                      target_tokens=4, cache_before=2, draft_cache=(2, 5, 4)))
    assert len(viewer.frames) == 2 and viewer.frame == 1
    verify, commit = viewer.frames
    assert kinds(verify["rows"]["target"]) == ["committed"] * 2 + ["scratch"] * 4
    assert [s["token_id"] for s in verify["rows"]["target"]] == [1, 2, 3, 4, 5, 6]
    assert kinds(commit["rows"]["target"]) == ["committed"] * 2 + ["kept"] * 2 + ["discarded"] * 2
    # the draft fed [3, 4, 5] (pending + all drafts but the last) and kept [3, 4]
    assert [s["token_id"] for s in verify["rows"]["draft"]] == [1, 2, 3, 4, 5]
    assert kinds(commit["rows"]["draft"]) == ["committed"] * 2 + ["kept"] * 2 + ["discarded"]
    assert viewer.summary == ("step 0, commit: the target kept 2 and discarded 2; the draft kept 2 and discarded 1 "
                              "(1 of 3 drafts accepted)")
    viewer.show(0)
    assert viewer.summary.startswith("step 0, verify: the target wrote 4 entries to scratch after 2 committed")
    # step 1 continues from the committed tokens [1, 2, 3, 4, 9]; a Lookahead-like step with 2 extra rows
    viewer(StepRecord(index=1, position=2, drafted=[7], num_accepted=1, emitted=[7, 8], last_kind="bonus",
                      target_tokens=4, cache_before=4))
    assert viewer.frame == 3  # follows the live run
    rows = viewer.frames[2]["rows"]
    assert set(rows) == {"target"}
    assert [s["token_id"] for s in rows["target"]] == [1, 2, 3, 4, 9, 7, None, None]
    assert kinds(viewer.rows["target"])[-4:] == ["kept", "kept", "discarded", "discarded"]
    assert "<script" not in viewer.html and "&lt;script&gt;" not in viewer.html  # token 0 never shown here
    for bad in (4, -5):
        with pytest.raises(ValueError, match=r"frame must be in \[-4, 3\]"):
            viewer.show(bad)
    for bad in (1.5, True, "2"):
        with pytest.raises(ValueError, match="frame must be an integer"):
            viewer.show(bad)
    assert viewer.frame == 3  # a refused call leaves the view where it was
    viewer.show(-1)
    assert viewer.frame == 3
    viewer.show(torch.tensor(1))
    assert viewer.frame == 1
    with pytest.raises(ValueError, match="no frames yet"):
        KVCacheViewer().show(0)


def test_kv_viewer_escapes_and_truncates():
    viewer = KVCacheViewer(FakeTokenizer(), prompt_ids=[0] * 10, max_slots=6)
    viewer(StepRecord(index=0, position=0, drafted=[0], num_accepted=0, emitted=[1], last_kind="resampled",
                      target_tokens=2, cache_before=9))
    page = viewer.html
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "… 5 earlier" in page  # 11 target slots, 6 drawn
    with pytest.raises(ValueError, match="cache_before"):
        viewer(StepRecord(index=1, position=1, drafted=[], num_accepted=0, emitted=[1], last_kind="bonus"))
    with pytest.raises(ValueError, match="max_slots"):
        KVCacheViewer(max_slots=2)
    assert KVCacheViewer(max_slots=np.int64(6)).max_slots == 6


def test_kv_viewer_follows_a_real_run_and_restarts(target, noisy_draft):
    prompt = [1, 2, 3, 4, 5]
    viewer = KVCacheViewer(prompt_ids=prompt)
    gen = generate(target, prompt, drafter=DraftModelDrafter(noisy_draft, 3), max_new_tokens=20, on_step=viewer)
    assert len(viewer.frames) == 2 * len(gen.steps)
    committed = list(prompt)
    for k, record in enumerate(gen.steps):
        commit = viewer.frames[2 * k + 1]["rows"]["target"]
        assert [s["token_id"] for s in commit if s["kind"] == "committed"] == committed[:-1]
        assert [s["token_id"] for s in commit if s["kind"] == "kept"] == [committed[-1]] + record.emitted[
            : record.num_accepted]
        committed += record.emitted
    generate(target, prompt, drafter=LookaheadDrafter(), max_new_tokens=5, on_step=viewer)
    assert viewer.frames[0]["step"] == 0 and len(viewer.frames) <= 10  # a new run replaced the old frames


def test_jacobi_viewer_on_a_real_run(target):
    run = jacobi_decode(target, [1, 2, 3, 4, 5], window=5)
    viewer = JacobiViewer(run)
    assert viewer.iteration == len(run.iterations) - 1
    assert viewer.converged_counts == run.converged_counts
    assert sum(viewer.newly_converged) == 5 - run.converged_counts[0]
    assert all(n >= 1 for n in viewer.newly_converged[: viewer.converged_counts.index(5)])
    assert [c["token_id"] for c in viewer.grid[-1]] == run.fixed_point
    assert all(c["state"] == "converged" for c in viewer.grid[-1])
    assert "window W = 5" in viewer.summary and f"{run.target_calls} target calls" in viewer.summary
    viewer.step_to(0)
    assert viewer.html.count("iter ") == 1
    viewer.step_to(-1)
    assert viewer.iteration == len(run.iterations) - 1
    for bad in (99, -99, 1.5, True):
        with pytest.raises(ValueError, match="iteration"):
            viewer.step_to(bad)
    assert viewer.iteration == len(run.iterations) - 1   # a refused value leaves the viewer where it was


def test_jacobi_viewer_states_by_hand():
    run = JacobiRun(prompt=[1], iterations=[[0, 5, 7], [4, 5, 6], [4, 5, 7], [4, 5, 7]], fixed_point=[4, 5, 7],
                    converged=True, converged_counts=[0, 2, 3, 3])
    viewer = JacobiViewer(run, tokenizer=FakeTokenizer())
    states = [[c["state"] for c in row] for row in viewer.grid]
    assert states[0] == ["guess", "correct", "correct"]
    assert states[1] == ["converged", "converged", "guess"]
    assert [[c["changed"] for c in row] for row in viewer.grid][1] == [True, False, True]
    assert viewer.newly_converged == [2, 1, 0]
    page = viewer.html
    assert "<script" not in page and "&lt;script&gt;" in page
    with pytest.raises(TypeError):
        viewer.show_run([1, 2])
    assert JacobiViewer().summary.startswith("no Jacobi run yet")
