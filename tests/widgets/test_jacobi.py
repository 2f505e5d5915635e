"""JacobiViewer (widgets/jacobi.py, lesson 09): kernel-side state after a real (tiny) Jacobi run and a hand-built
one."""
import pytest

from lab.drafters.lookahead import JacobiRun, jacobi_decode
from widgets.jacobi import JacobiViewer

SCRIPT = "<script>alert(1)</script>"


class FakeTokenizer:
    def decode(self, ids):
        return "".join(SCRIPT if t == 0 else f"t{t}" for t in ids)


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


@pytest.mark.parametrize("tokenizer", [[1, 2, 3], "gpt2"])
def test_a_tokenizer_that_cannot_decode_is_named_at_once(tokenizer):
    """Token ids or a model name passed as the tokenizer raised AttributeError ('list' object has no attribute
    'decode') from inside the drawing, as the other viewers no longer do."""
    with pytest.raises(TypeError, match="tokenizer must be None or have a decode"):
        JacobiViewer(None, tokenizer)


@pytest.mark.parametrize("fields, error, message", [
    (dict(iterations=[]), ValueError, "at least the initial guess"),
    (dict(iterations=[[0, 5], [4, 5, 7]]), ValueError, r"iterations\[0\] holds 2 tokens, but every window holds W = 3"),
    (dict(iterations=[[0, 5, 7.5], [4, 5, 7]]), TypeError, r"iterations\[0\] must hold integer"),
    (dict(iterations="abc"), TypeError, "iterations must be a list of windows"),
    (dict(fixed_point=[4, 5, -7]), ValueError, "fixed_point must be token ids"),
    (dict(converged="yes"), TypeError, "converged must be True or False"),
    (dict(converged_counts=[0, 3]), ValueError, "converged_counts must be converged_prefix"),
    (dict(converged=False), ValueError, "converged_counts must be empty"),
    (dict(iterations=[[0, 5, 7], [4, 5, 6]], converged_counts=[0, 2]), ValueError, "ends at its fixed point"),
    (dict(iterations=[[0, 5, 7], [4, 5, 6]], converged=False, converged_counts=[]), ValueError,
     "iterations\\[-1\\] must equal fixed_point"),
    (dict(converged_counts=None), TypeError, "converged_counts must be a list of ints, got NoneType"),
])
def test_a_hand_built_run_is_checked(fields, error, message):
    """A tester's hand-built run without iterations, or with ragged rows, raised raw IndexErrors and ValueErrors from
    inside the viewer's drawing; a run now says what is wrong with it when it is built."""
    base = dict(prompt=[1], iterations=[[0, 5, 7], [4, 5, 7], [4, 5, 7]], fixed_point=[4, 5, 7], converged=True,
                converged_counts=[0, 3, 3])
    with pytest.raises(error, match=message):
        JacobiRun(**{**base, **fields})
    assert JacobiViewer(JacobiRun(**base), tokenizer=FakeTokenizer()).summary.startswith("window W = 3")
    assert JacobiRun(**{**base, "converged_counts": []}).converged_counts == [0, 3, 3]  # filled in when left out
    import numpy as np

    assert JacobiRun(**{**base, "converged": np.bool_(True)}).converged is True  # NumPy's bool counts
