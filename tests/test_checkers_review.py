"""Review of the exercise checkers as learners use them: answers written differently from the reference are accepted,
plausible mistakes get the hint that names them, and no checker hangs, crashes or corrupts its own cases."""
from __future__ import annotations

import signal
import time

import numpy as np
import pytest
import torch

from conftest import rejects
from lab import check, check_arena, check_costs, check_decoding, check_picker, check_trees, metrics, sampling


def forever(*args, **kwargs):
    while True:
        pass


# --- every call of the learner's function is time-limited, not only those made through _compare -------------------

def _models():
    from conftest import tiny_llama

    return tiny_llama(0, layers=1)


HANGING = [
    ("speculative_step", lambda: check.speculative_step(forever)),
    ("greedy_draft", lambda: check.greedy_draft(forever)),
    ("topk_draft", lambda: check.topk_draft(forever)),
    ("accept_or_reject", lambda: check.accept_or_reject(forever)),
    ("chi_square_pvalue", lambda: check.chi_square_pvalue(forever)),
    ("speculation_metrics", lambda: check.speculation_metrics(forever)),
    ("next_n_draft", lambda: check_arena.next_n_draft(forever)),
    ("stats_from_vllm_counters", lambda: check_picker.stats_from_vllm_counters(forever)),
    ("medusa_loss", lambda: check_trees.medusa_loss(forever)),
    ("tree_mask", lambda: check_trees.tree_mask(forever)),
    ("rollback_after_rejection", lambda: check_decoding.rollback_after_rejection(forever, _models(), [1, 2, 3],
                                                                                 [4, 5])),
]


@pytest.mark.parametrize("name, call", HANGING, ids=[h[0] for h in HANGING])
def test_a_call_that_never_returns_is_stopped_in_every_checker(name, call, monkeypatch, capsys):
    monkeypatch.setattr(check, "CALL_TIME_LIMIT_S", 0.3)
    handler = signal.getsignal(signal.SIGALRM)
    start = time.perf_counter()
    ok = call()
    out = capsys.readouterr().out
    assert time.perf_counter() - start < 10, out
    assert ok is False
    assert out.startswith(f"✗ {name}: forever("), out
    assert "did not return within 0.3 s" in out and "loop with no way out" in out
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler


def test_the_time_out_message_shows_models_and_long_lists_briefly(monkeypatch, capsys):
    # rollback_after_rejection's arguments include a model: its repr is dozens of lines
    monkeypatch.setattr(check, "CALL_TIME_LIMIT_S", 0.3)
    assert check_decoding.rollback_after_rejection(forever, _models(), [1, 2, 3], [4, 5]) is False
    out = capsys.readouterr().out
    assert "forever(<LlamaForCausalLM>, [1, 2, 3], [4, 5], 1)" in out, out
    assert len(out.splitlines()) == 2, out
    # chi_square_pvalue's first argument is 2000 tokens
    assert check.chi_square_pvalue(forever) is False
    out = capsys.readouterr().out
    assert len(out.splitlines()[0]) < 300, out
    # a tensor argument with many values: its shape and dtype
    assert check._show_brief(torch.zeros(2, 2048)) == "<tensor [2, 2048] float32>"
    assert check._show_brief(torch.tensor([0.5, 0.25])) == check._show(torch.tensor([0.5, 0.25]))


# --- a function that edits a dict (or a step record) it was given does not corrupt the checker's cases -------------

def _kv(config, dtype):
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize


def test_kv_bytes_from_config_reports_a_config_changed_in_place_and_keeps_its_cases(capsys):
    import copy

    before = copy.deepcopy(check_costs._KV_CASES)

    def pops_head_dim(config, dtype):  # right numbers, but Gemma's head_dim is gone from the case afterwards
        head_dim = config.pop("head_dim", None) or config["hidden_size"] // config["num_attention_heads"]
        return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize

    def fills_head_dim_wrongly(config, dtype):
        head_dim = config.setdefault("head_dim", config["hidden_size"] // config["num_key_value_heads"])
        return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize

    out = rejects(check_costs.kv_bytes_from_config, pops_head_dim, capsys, "changed its argument `config` in place",
                  "pop")
    out = rejects(check_costs.kv_bytes_from_config, fills_head_dim_wrongly, capsys, "in place")
    assert "head_dim=1024" not in out, out  # the case is shown as it was, not with the learner's addition
    assert check_costs._KV_CASES == before
    # the cases still tell a right answer from one that ignores an explicit head_dim (Gemma's 256)
    assert check_costs.kv_bytes_from_config(_kv)
    rejects(check_costs.kv_bytes_from_config,
            lambda c, d: 2 * c["num_hidden_layers"] * c["num_key_value_heads"]
            * (c["hidden_size"] // c["num_attention_heads"]) * d.itemsize, capsys, "head_dim explicitly")


def test_step_records_changed_in_place_are_reported_and_the_cases_stay(capsys):
    before = [[(list(s.drafted), s.num_accepted, s.draft_ms) for s in steps] for steps in check_arena._STEP_LISTS]

    def truncates(steps):  # right alpha, but it cuts every record's drafts down to the accepted ones
        accepted = sum(s.num_accepted for s in steps)
        rejections = sum(1 for s in steps if s.drafted and s.num_accepted < len(s.drafted))
        for s in steps:
            s.drafted = s.drafted[:s.num_accepted]
        return accepted / (accepted + rejections) if accepted + rejections else None

    rejects(check_arena.alpha_from_steps, truncates, capsys, "in place")
    after = [[(list(s.drafted), s.num_accepted, s.draft_ms) for s in steps] for steps in check_arena._STEP_LISTS]
    assert after == before


# --- lesson 14: vLLM's counters to our stats --------------------------------------------------------------------

def _vllm_stats(d, t, a, p, per_position=list, number=float):
    if d == 0:
        return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
    return {"acceptance_rate": number(a / t), "tokens_per_target_call": number(1 + a / d),
            "per_position_acceptance": per_position([x / d for x in p])}


@pytest.mark.parametrize("per_position, number", [
    (lambda xs: torch.tensor(xs), float),                      # float32 tensor: values off by float32 rounding
    (lambda xs: torch.tensor(xs, dtype=torch.float64), float),
    (lambda xs: np.asarray(xs, dtype=np.float32), float),
    (tuple, float),
    (list, lambda x: torch.tensor(x)),                         # 0-d float32 tensors
    (list, np.float32),
], ids=["tensor32", "tensor64", "numpy32", "tuple", "tensor-scalars", "numpy32-scalars"])
def test_stats_from_vllm_counters_accepts_float32_and_other_containers(per_position, number, capsys):
    ok = check_picker.stats_from_vllm_counters(lambda *c: _vllm_stats(*c, per_position=per_position, number=number))
    out = capsys.readouterr().out
    assert ok, out


@pytest.mark.parametrize("per_position", [lambda xs: map(float, xs), lambda xs: (x for x in xs)], ids=["map", "gen"])
def test_stats_from_vllm_counters_refuses_a_one_shot_iterator(per_position, capsys):
    # lesson 14 indexes the list afterwards (theirs['per_position_acceptance'][0]): a map or generator fails there
    rejects(check_picker.stats_from_vllm_counters, lambda *c: _vllm_stats(*c, per_position=per_position), capsys,
            "per_position_acceptance", "list")


def test_stats_from_vllm_counters_still_rejects_a_value_a_little_off(capsys):
    def off(d, t, a, p):
        out = _vllm_stats(d, t, a, p)
        if d:
            out["acceptance_rate"] *= 1.0001
        return out

    rejects(check_picker.stats_from_vllm_counters, off, capsys, "acceptance_rate should be")


# --- lesson 04: the token a draft proposes must be an integer id ---------------------------------------------------

def _one_hot(d):
    return torch.nn.functional.one_hot(d.argmax(), len(d)).to(d.dtype)


def test_greedy_draft_names_a_probability_returned_as_the_token(capsys):
    # max() gives the largest probability, argmax() its index; int(0.6) == 0 must not read as "proposed token 0"
    out = rejects(check.greedy_draft, lambda d: (d.max(), _one_hot(d)), capsys, "argmax")
    assert "proposed token 0" not in out, out
    out = rejects(check.greedy_draft, lambda d: (float(d.max()), _one_hot(d)), capsys, "argmax")
    assert "proposed token 0" not in out, out


@pytest.mark.parametrize("token", [None, "0", 1.5], ids=["None", "str", "float"])
def test_greedy_draft_a_token_that_is_no_integer_is_the_learners_answer_not_their_error(token, capsys):
    out = rejects(check.greedy_draft, lambda d: (token, _one_hot(d)), capsys, "integer token id")
    assert "your function raised" not in out, out


def test_draft_checkers_accept_integer_tokens_of_every_kind(capsys):
    assert check.greedy_draft(lambda d: (d.argmax(), _one_hot(d)))                  # a 0-d Long tensor
    assert check.greedy_draft(lambda d: (np.int64(d.argmax()), _one_hot(d).numpy()))
    assert check.greedy_draft(lambda d: (d.argmax().reshape(1), _one_hot(d)))       # one-element tensor

    def topk(d, k, generator):
        kept = torch.where(d >= torch.topk(d, k).values[-1], d, torch.zeros_like(d))
        kept = kept / kept.sum()
        return torch.multinomial(kept, 1, generator=generator), kept                 # shape [1]
    assert check.topk_draft(topk)
    rejects(check.topk_draft, lambda d, k, g: (None, topk(d, k, g)[1]), capsys, "integer token id")


# --- hints that name the mistake ---------------------------------------------------------------------------------

@pytest.mark.parametrize("wrap, shown", [(lambda x: [x], "returned [45]"), (lambda x: (x,), "returned (45,)"),
                                         (lambda x: np.array([x]), "returned array([45.])")],
                         ids=["list", "tuple", "array"])
def test_a_number_wrapped_in_a_container_gets_its_own_hint(wrap, shown, capsys):
    out = rejects(check.step_latency, lambda t, d, n: wrap(n * d + t), capsys, shown, "a single number")
    assert "one step = n_draft draft passes" not in out, out


def test_a_residual_with_an_extra_batch_dimension_gets_a_shape_hint(capsys):
    def batched(t, d):  # right values, shape [1, V] for a [V] input
        return sampling.residual_distribution(t, d).reshape(1, *t.shape)

    out = rejects(check.residual_distribution, batched, capsys, "shape", "[1, 4]", "[4]")
    assert "max(0, target - draft) / its sum" not in out, out


def test_a_residual_that_forgot_the_clamp_in_the_numerator(capsys):
    def unclamped(t, d):  # divides by the positive mass, but keeps the negative differences
        mass = (t - d).clamp_min(0).sum(-1, keepdim=True)
        return torch.where(mass > 0, (t - d) / mass.clamp_min(1e-30), t)

    rejects(check.residual_distribution, unclamped, capsys, "clamp negative differences to 0")


def test_predicted_speedup_with_alpha_to_the_n(capsys):
    rejects(check.predicted_speedup, lambda a, n, c: sum(a ** i for i in range(n)) / (1 + n * c), capsys,
            "exponent is N + 1")


def test_best_n_draft_that_ignores_max_n(capsys):
    rejects(check.best_n_draft,
            lambda a, c, m: max(range(1, 17), key=lambda n: metrics.predicted_speedup(a, n, c)), capsys,
            "the max_n argument, not a fixed range")


def test_chi_square_pvalue_that_returns_the_whole_result(capsys):
    from scipy.stats import chisquare

    rejects(check.chi_square_pvalue,
            lambda tokens, p: chisquare([tokens.count(i) for i in range(len(p))], [x * len(tokens) for x in p]),
            capsys, "whole result", "float(result.pvalue)")


def test_speculation_metrics_without_a_return(capsys):
    rejects(check.speculation_metrics, lambda steps, c: None, capsys, "returned None", "`return`")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_right_residual_computed_on_the_gpu_is_accepted(capsys):
    # was "your function raised RuntimeError: Expected all tensors to be on the same device" (the checker's allclose)
    ok = check.residual_distribution(lambda t, d: sampling.residual_distribution(t.cuda(), d.cuda()))
    out = capsys.readouterr().out
    assert ok, out


def test_next_n_draft_without_a_return(capsys):
    rejects(check_arena.next_n_draft, lambda n, a, d: None, capsys, "returned None", "`return`")


def test_stats_from_vllm_counters_with_none_per_position_is_not_called_an_iterator(capsys):
    # None is a missing value, not a one-shot iterator: it reaches the comparison, which names the key
    out = rejects(check_picker.stats_from_vllm_counters, lambda *c: {**_vllm_stats(*c), "per_position_acceptance": None},
                  capsys, "per_position_acceptance")
    assert "read only once" not in out, out



@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_right_greedy_draft_on_the_gpu_is_accepted(capsys):
    def greedy(draft_probs):
        probs = draft_probs.cuda()
        token = int(probs.argmax())
        return token, torch.nn.functional.one_hot(torch.tensor(token), probs.numel()).to(probs)

    ok = check.greedy_draft(greedy)
    out = capsys.readouterr().out
    assert ok, out


def test_a_limited_call_inside_another_runs_directly_and_the_outer_limit_still_holds(monkeypatch):
    threads = []
    monkeypatch.setattr(check, "_call_in_thread", lambda *a: threads.append(a) or pytest.fail("no thread needed"))
    inner = check._time_limited(lambda x: x + 1, 5.0)
    outer = check._time_limited(lambda x: inner(x) * 10, 5.0)
    assert outer(1) == 20 and not threads

    def spin():
        while True:
            pass

    stuck = check._time_limited(lambda: check._time_limited(spin, 60.0)(), 0.3)
    start = time.monotonic()
    with pytest.raises(check._NoReturn):
        stuck()
    assert time.monotonic() - start < 10 and not getattr(check._LIMIT, "active", False)


@pytest.mark.parametrize("wrap", [torch.tensor, lambda xs: (x for x in xs), lambda xs: map(int, xs)],
                         ids=["tensor", "generator", "map"])
def test_token_list_checkers_refuse_tensors_and_one_shot_iterators(wrap, capsys):
    from lab.drafters.prompt_lookup import ngram_lookup
    from lab.kv import emitted_tokens

    for checker, right in ((check_decoding.emitted_tokens, emitted_tokens), (check_decoding.ngram_lookup,
                                                                              ngram_lookup)):
        assert checker(right), capsys.readouterr().out
        capsys.readouterr()
        rejects(checker, lambda *a, right=right: wrap(right(*a)), capsys, "return a list of int token ids")
    # a tuple of ints is still a right answer
    assert check_decoding.emitted_tokens(lambda *a: tuple(emitted_tokens(*a))), capsys.readouterr().out


# --- lessons 07-11: wrong answers the checkers used to accept (session 12 review) ---------------------------------
def test_rollback_checker_reports_a_prefix_changed_in_place(capsys, target):
    """`prefix_ids += draft_ids` passed the checker (it handed over copies) and then broke the lesson's next cell,
    whose own prefix had grown."""
    from lab.kv import rollback
    from lab.models import forward, new_cache

    def grows_the_prefix(model, prefix_ids, draft_ids, rejected_at):
        cache = new_cache()
        prefix_ids += draft_ids
        forward(model, prefix_ids, cache)
        return rollback(cache, len(prefix_ids) - len(draft_ids) + rejected_at - 1)

    capsys.readouterr()
    assert not check_decoding.rollback_after_rejection(grows_the_prefix, target, list(range(3, 13)), [20, 21, 22])
    out = capsys.readouterr().out
    assert "changed prefix_ids in place" in out and "prefix_ids + draft_ids" in out


def test_positions_and_kept_lengths_must_be_whole_ints(capsys):
    import numpy as np

    rejects(check_decoding.next_position, lambda p, k: float(p + k + 1), capsys, "an int")
    rejects(check_decoding.draft_keep_length, lambda h, k, n: h - max(0.0, n - 1.0 - k), capsys, "an int")
    assert check_decoding.next_position(lambda p, k: np.int64(p + k + 1))
    assert check_decoding.next_position(lambda p, k: torch.tensor(p + k + 1))


def test_count_converged_refuses_a_one_shot_iterator(capsys):
    from lab.drafters.lookahead import converged_prefix

    rejects(check_decoding.count_converged, lambda its: (converged_prefix(w, its[-1]) for w in its), capsys,
            "returned a generator", "counts[1:]")
    rejects(check_decoding.count_converged, lambda its: map(lambda w: converged_prefix(w, its[-1]), its), capsys,
            "returned a map")
    assert check_decoding.count_converged(lambda its: tuple(converged_prefix(w, its[-1]) for w in its))


def test_accepted_path_refuses_a_tensor_and_a_walk_capped_at_three_levels(capsys):
    from lab.verify import verify_tree_greedy

    rejects(check_trees.accepted_path, lambda a, t, p: torch.tensor(verify_tree_greedy(a, t, p).path), capsys,
            "returned a Tensor", "if path")

    def three_levels(argmax, tokens, parents):  # "Medusa has 3 heads"
        node, path = -1, []
        for _ in range(3):
            match = next((c for c, parent in enumerate(parents) if parent == node and tokens[c] == argmax[node + 1]),
                         None)
            if match is None:
                break
            path.append(match)
            node = match
        return path

    rejects(check_trees.accepted_path, three_levels, capsys)


def test_ngram_lookup_and_tokens_per_call_name_the_mistake_they_fit(capsys, target):
    from lab.check_trees import _ref_tokens_per_call

    def skips_start(context, max_ngram, n_draft):
        for n in range(min(max_ngram, len(context) - 1), 0, -1):
            for i in range(len(context) - n - 1, 0, -1):   # never checks i = 0
                if context[i:i + n] == context[-n:]:
                    return list(context[i + n:i + n + n_draft])
        return []

    rejects(check_decoding.ngram_lookup, skips_start, capsys, "including start 0")

    def last_prompt(t, make, ps, m, eos_token_id=None):
        from lab.decode import generate
        for p in ps:  # = instead of +=: only the last prompt's run is left
            g = generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id)
            tokens, calls = len(g.tokens), g.stats["target_calls"]
        return tokens / calls

    capsys.readouterr()
    assert not check_trees.tokens_per_call(last_prompt, target, [list(range(1, 30)), list(range(30, 60))])
    assert "add up over ALL prompts" in capsys.readouterr().out
    assert check_trees.tokens_per_call(_ref_tokens_per_call, target, [list(range(1, 30)), list(range(30, 60))])


# --- lessons 04, 06, 14: wrong answers the checkers used to accept (session 12 review) ----------------------------
def test_best_n_draft_must_be_an_int(capsys):
    import numpy as np

    from lab.metrics import optimal_n_draft

    rejects(check.best_n_draft, lambda a, c, m: float(optimal_n_draft(a, c, m)), capsys, "return N as an int")
    rejects(check.best_n_draft, lambda a, c, m: np.arange(1.0, m + 1)[optimal_n_draft(a, c, m) - 1], capsys,
            "np.arange")   # cell 16 formats N with :2d
    assert check.best_n_draft(lambda a, c, m: np.int64(optimal_n_draft(a, c, m)))


def test_speculation_metrics_counts_a_step_without_drafts_as_a_target_call(capsys):
    def only_drafting_steps(steps, cost_ratio):
        ref = check._ref_speculation_metrics(steps, cost_ratio)
        calls = sum(1 for s in steps if s.drafted)
        emitted = sum(len(s.emitted) for s in steps)
        return {**ref, "tokens_per_target_call": emitted / calls}

    rejects(check.speculation_metrics, only_drafting_steps, capsys, "tokens_per_target_call")


def test_speculative_step_is_checked_beyond_three_drafts(capsys):
    from lab.toy import speculative_step

    def capped(prefix, target_model, draft_model, n_draft, rng):  # a loop capped at the checks' old largest N
        return speculative_step(prefix, target_model, draft_model, min(n_draft, 3), rng)

    rejects(check.speculative_step, capped, capsys, "every draft is accepted")
    assert check.speculative_step(speculative_step)


def test_stats_from_vllm_counters_reports_counters_changed_in_place(capsys):
    def divides_in_place(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        if num_drafts == 0:
            return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
        for i in range(len(accepted_per_position)):
            accepted_per_position[i] /= num_drafts
        return {"acceptance_rate": num_accepted_tokens / num_draft_tokens,
                "tokens_per_target_call": 1 + num_accepted_tokens / num_drafts,
                "per_position_acceptance": accepted_per_position}

    rejects(check_picker.stats_from_vllm_counters, divides_in_place, capsys, "changed accepted_per_position in place")
