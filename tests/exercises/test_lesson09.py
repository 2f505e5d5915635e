"""The exercise checkers of lesson 09 (Jacobi iteration; lab.exercises.lesson09): the reference passes, planted mistakes
are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

from lab.drafters.lookahead import converged_prefix, jacobi_update
from lab.exercises import harness
from lab.exercises import lesson09 as check
from lab.models import forward, new_cache
from tests.helpers import rejects


def run(capsys, checker, fn, *args):
    ok = checker(fn, *args)
    return ok, capsys.readouterr().out


def test_count_converged_hints(capsys):
    def vs_previous(iterations):
        out = [0]
        for old, new in zip(iterations, iterations[1:]):
            out.append(converged_prefix(new, old))
        return out

    def newly(iterations):
        final = iterations[-1]
        counts = [converged_prefix(w, final) for w in iterations]
        return [counts[0]] + [b - a for a, b in zip(counts, counts[1:])]

    def second_last(iterations):  # right for every trajectory that repeats its fixed point
        return [converged_prefix(w, iterations[-2]) for w in iterations]

    rejects(check.count_converged, vs_previous, capsys, "FIXED POINT")
    rejects(check.count_converged, second_last, capsys, "iterations[-1]")
    rejects(check.count_converged, newly, capsys, "running total")


def test_jacobi_step_window_only_hint(target, capsys):
    from lab.models import forward, new_cache

    def window_only(m, p, w):
        return forward(m, w, new_cache()).argmax(-1).tolist()

    capsys.readouterr()
    assert check.jacobi_step(window_only, target, [1, 2, 3, 4, 5]) is False
    assert "feed prefix + window" in capsys.readouterr().out


def test_count_converged_refuses_a_one_shot_iterator(capsys):
    from lab.drafters.lookahead import converged_prefix

    rejects(check.count_converged, lambda its: (converged_prefix(w, its[-1]) for w in its), capsys,
            "returned a generator", "counts[1:]")
    rejects(check.count_converged, lambda its: map(lambda w: converged_prefix(w, its[-1]), its), capsys,
            "returned a map")
    assert check.count_converged(lambda its: tuple(converged_prefix(w, its[-1]) for w in its))


def test_jacobi_step_checker(capsys, target):
    prefix = [1, 2, 3, 4, 5]
    ok, out = run(capsys, check.jacobi_step, jacobi_update, target, prefix)
    assert ok

    def shifted(model, p, w):
        return forward(model, p + w, new_cache())[len(p):len(p) + len(w)].argmax(-1).tolist()

    def sequential(model, p, w):
        out = []
        for _ in w:
            out.append(int(forward(model, p + out, new_cache())[-1].argmax()))
        return out

    ok, out = run(capsys, check.jacobi_step, shifted, target, prefix)
    assert not ok and "row j of the logits predicts position j + 1" in out and "tokens)" in out
    ok, out = run(capsys, check.jacobi_step, sequential, target, prefix)
    assert not ok and "autoregressive" in out


def test_jacobi_step_refuses_a_tensor_and_an_updated_window(capsys, target):
    """Both used to pass, then broke the lesson's next cell (it keeps each window and compares them with ==)."""
    prefix = [1, 2, 3, 4, 5]

    def as_tensor(model, p, w):
        return forward(model, p + w, new_cache())[len(p) - 1:len(p) - 1 + len(w)].argmax(-1)

    def in_place(model, p, w):
        w[:] = jacobi_update(model, p, w)
        return w

    def grows_prefix(model, p, w):
        ids = p
        ids += w
        return forward(model, ids, new_cache())[len(ids) - len(w) - 1:-1].argmax(-1).tolist()

    ok, out = run(capsys, check.jacobi_step, as_tensor, target, prefix)
    assert not ok and "returned a Tensor; return a new list" in out
    ok, out = run(capsys, check.jacobi_step, lambda m, p, w: tuple(jacobi_update(m, p, w)), target, prefix)
    assert not ok and "a tuple never equals a list" in out
    ok, out = run(capsys, check.jacobi_step, lambda m, p, w: None, target, prefix)  # _compare's own hint
    assert not ok and "forget a `return`" in out
    ok, out = run(capsys, check.jacobi_step, in_place, target, prefix)
    assert not ok and "changed its argument `w` in place" in out and "Build a new list" in out
    ok, out = run(capsys, check.jacobi_step, grows_prefix, target, prefix)
    assert not ok and "changed its argument `p` in place" in out and f"prefix_ids ({len(prefix)} tokens)" in out


def test_count_converged_checker(capsys):
    def reference(iterations):
        final, out = iterations[-1], []
        for window in iterations:
            k = 0
            while k < len(window) and window[k] == final[k]:
                k += 1
            out.append(k)
        return out

    assert run(capsys, check.count_converged, reference)[0]
    ok, out = run(capsys, check.count_converged,
                  lambda its: [sum(a == b for a, b in zip(w, its[-1])) for w in its])
    assert not ok and "leading run" in out


def test_jacobi_step_time_limit_covers_the_type_check(capsys, target, monkeypatch):
    """The return-type check ran the learner's function outside the time limit: a loop that never ends hung."""
    monkeypatch.setattr(harness, "CALL_TIME_LIMIT_S", 0.5)

    def stuck(model, p, w):
        while True:
            pass

    ok, out = run(capsys, check.jacobi_step, stuck, target, [1, 2, 3])
    assert not ok and "did not return within" in out


def test_jacobi_step_checker_on_the_real_pair(capsys, smollm2_pair):
    """The lesson runs the checker on SmolLM2-135M-Instruct (a 49,152-token vocabulary, chat-template prompts): the
    reference passes and the off-by-one row is still named."""
    from lab.prompts import arena_prompts, encode_prompts

    prefix = encode_prompts(smollm2_pair, arena_prompts(smollm2_pair, "code")[:1])[0][-24:]
    target = smollm2_pair.target
    ok, out = run(capsys, check.jacobi_step, jacobi_update, target, prefix)
    assert ok and "6 windows" in out

    def shifted(model, p, w):
        return forward(model, p + w, new_cache())[len(p):len(p) + len(w)].argmax(-1).tolist()

    ok, out = run(capsys, check.jacobi_step, shifted, target, prefix)
    assert not ok and "row j of the logits predicts position j + 1" in out
