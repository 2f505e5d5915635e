"""The exercise checkers of lesson 11 (EAGLE's training pairs; lab.exercises.lesson11): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

from lab.exercises import lesson11 as check
from tests.helpers import rejects


def stub(*args):
    raise NotImplementedError


# a window of 3 tokens gives exactly one pair; a solution that squeezes its parts loses that dimension.
def test_eagle_training_pairs_single_pair_window(capsys):
    def squeezed(h, x):
        return h[:-2].squeeze(), x[1:-1].squeeze(), h[1:-1].squeeze(), x[2:].squeeze()

    out = rejects(check.eagle_training_pairs, squeezed, capsys, "hidden [3, 2]")
    assert "features_in is" in out


def test_eagle_training_pairs(capsys):
    assert check.eagle_training_pairs(lambda h, x: (h[:-2], x[1:-1], h[1:-1], x[2:]))
    assert not check.eagle_training_pairs(lambda h, x: (h[:-2], x[:-2], h[1:-1], x[1:-1]))
    out = capsys.readouterr().out
    assert "NEXT token" in out and "tokens_in is ids[:-2]" in out and "token_targets is ids[1:-1]" in out
    assert "features_in" not in out and "slice, do not loop" not in out
    assert not check.eagle_training_pairs(lambda h, x: (h[:-2], x[1:-1], h[:-2], x[2:]))
    out = capsys.readouterr().out
    assert "NEXT feature" in out and "1 of the four parts is wrong" in out and "feature_targets is hidden[:-2]" in out
    assert not check.eagle_training_pairs(stub)


def test_eagle_training_pairs_accepts_loops_and_names_the_wrong_part(capsys):
    def loop(h, x):
        parts = ([], [], [], [])
        for j in range(len(x) - 2):
            for part, value in zip(parts, (h[j], x[j + 1], h[j + 1], x[j + 2])):
                part.append(value)
        return parts

    assert check.eagle_training_pairs(loop)
    capsys.readouterr()
    assert not check.eagle_training_pairs(lambda h, x: (h[1:-1], x[1:-1], h[1:-1], x[2:]))
    out = capsys.readouterr().out
    assert "features_in is hidden[1:-1]; expected f_j, the feature at each input position j = 0 … L-3" in out
    assert "hidden[:-2]" not in out  # a learner: the first failure handed over every slice
    assert "tensor([" not in out  # names the slice instead of printing whole tensors
    assert not check.eagle_training_pairs(lambda h, x: (h[:-2], x[1:-1], h[1:-1], x[2:] + 1))
    assert "token_targets is a tensor of shape" in capsys.readouterr().out
    assert not check.eagle_training_pairs(lambda h, x: (h[:-2], x[1:-1], h[1:-1]))
    assert "return four things" in capsys.readouterr().out


def test_mtp_depth_pairs(capsys):
    assert check.mtp_depth_pairs(check.reference_mtp_depth_pairs)
    assert check.mtp_depth_pairs(lambda x, k: ([x[i + k] for i in range(len(x) - k - 1)],  # a loop works too
                                               [x[i + k + 1] for i in range(len(x) - k - 1)]))
    capsys.readouterr()
    for wrong, words in [(lambda x, k: (x[1:-1], x[2:]), "the depth matters"),
                         (lambda x, k: (x[k - 1:-2], x[k + 1:]), "not t_{i+k-1}"),
                         (lambda x, k: (x[k:-1], x[k:-1]), "the NEXT token after the one read"),
                         (lambda x, k: (x[1:len(x) - k], x[k + 1:]), "tokens in between go unseen")]:
        assert not check.mtp_depth_pairs(wrong)
        out = capsys.readouterr().out
        assert words in out and "mtp_depth_pairs(ids=" in out, out
    assert not check.mtp_depth_pairs(lambda x, k: (x[k:], x[k + 1:]))  # one row too many: the generic hint
    assert "two slices of ids" in capsys.readouterr().out
    assert not check.mtp_depth_pairs(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_mtp_depth_pairs_are_the_rows_mtp_heads_train(pair):
    """The reference is what lab.training.chat_mtp.mtp_loss scores: module k's row i embeds ids[i + k] (the
    module's input, checked by feeding it) and is labelled ids[i + k + 1]."""
    import torch

    from lab.drafters.mtp import MTPHeads

    torch.manual_seed(0)
    heads = MTPHeads(pair.target, {"depth": 3, "intermediate": 16}).eval()
    ids = torch.randint(0, 2000, (9,))
    hidden = torch.randn(1, 9, pair.target.config.hidden_size)
    with torch.no_grad():
        outs = heads(hidden, ids[None])
        h = hidden[0]
        for k in range(1, 4):
            tokens_in, targets = check.reference_mtp_depth_pairs(ids, k)
            rows = len(targets)
            assert rows == len(tokens_in) == 9 - k - 1
            alone = heads.step(k, h[:rows], tokens_in, position_ids=torch.arange(k, k + rows))
            assert torch.allclose(alone, outs[k - 1][0, :rows], atol=1e-5)
            h = outs[k - 1][0]


def test_d2t_from_counts(capsys):
    import collections

    import torch

    assert check.d2t_from_counts(check.reference_d2t_from_counts)

    def with_counter(counts, size):  # the official script's way: Counter.most_common, then sort (a list works)
        counter = collections.Counter({i: int(c) for i, c in enumerate(counts)})
        ids = sorted(sorted(counter, key=lambda i: (-counter[i], i))[:size])
        return [t - i for i, t in enumerate(ids)]

    assert check.d2t_from_counts(with_counter)
    top = lambda c, n: torch.sort(-c, stable=True).indices[:n]  # noqa: E731
    for wrong, words in [(lambda c, n: top(c, n).sort().values, "store offsets, not ids"),
                         (lambda c, n: torch.arange(n) - top(c, n).sort().values, "the sign is flipped"),
                         (lambda c, n: top(c, n) - torch.arange(n), "sort the chosen ids ascending"),
                         (lambda c, n: torch.sort(c, stable=True).indices[:n].sort().values - torch.arange(n),
                          "MOST frequent")]:
        rejects(check.d2t_from_counts, wrong, capsys, words, "d2t_from_counts(counts=")
    rejects(check.d2t_from_counts, lambda c, n: top(c, n + 1).sort().values[1:] - torch.arange(n), capsys,
            "the same counts, other ids")  # on the tie case this off-by-one keeps ids of equal counts: said so
    assert not check.d2t_from_counts(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_d2t_from_counts_matches_the_course_drafts_vocabulary(pair):
    """The reference picks the set lab.drafters.draft_vocab.frequent_tokens picks, and an Eagle3DraftModel built on
    those ids, sorted, stores exactly the reference's d2t (the model maps draft id i to target id i + d2t[i])."""
    import torch

    from lab.drafters.draft_vocab import frequent_tokens
    from lab.drafters.eagle3 import Eagle3DraftModel

    V = pair.target.config.vocab_size
    ids = torch.randint(0, V, (4000,), generator=torch.Generator().manual_seed(0)) % 300  # many ties
    counts = torch.bincount(ids, minlength=V)
    d2t = check.reference_d2t_from_counts(counts, 64)
    chosen = torch.arange(64) + d2t
    assert torch.equal(chosen, frequent_tokens([ids], 64, V).sort().values)
    assert (d2t >= 0).all() and (d2t[1:] >= d2t[:-1]).all()
    model = Eagle3DraftModel(pair.target, draft_vocab=chosen)
    assert torch.equal(model.d2t, d2t) and torch.equal(model.draft_vocab, chosen)


def test_d2t_from_counts_ties_unseen_ids_and_numpy(capsys):
    """torch.topk breaks ties its own way: the checker names the tie rule; an answer that keeps only the ids that
    occur fails on a vocabulary larger than them (as in the lesson, where 512 places outnumber the ids counted); a
    NumPy answer with the right values passes."""
    import numpy as np
    import torch

    rejects(check.d2t_from_counts, lambda c, n: torch.topk(c, n).indices.sort().values - torch.arange(n), capsys,
            "the same counts, other ids", "take the smaller id first")

    def seen_only(counts, size):
        ids = torch.nonzero(counts).flatten()
        chosen = ids[torch.sort(-counts[ids], stable=True).indices][:size].sort().values
        return chosen - torch.arange(len(chosen))

    rejects(check.d2t_from_counts, seen_only, capsys, "counts=[0, 3, 0, 0, 5, 0], size=4",
            "ids that never occur tie at 0 and fill the remaining places")
    assert check.d2t_from_counts(lambda c, n: np.sort(np.argsort(-c.numpy(), kind="stable")[:n]) - np.arange(n))


def test_eagle_training_pairs_names_an_input_edited_in_place(capsys):
    """The returned slices of an edited `hidden` were blamed part by part ("features_in is ...; expected hidden[:-2]",
    which the learner had returned)."""
    def edits(hidden, ids):
        hidden[0] = 0
        return hidden[:-2], ids[1:-1], hidden[1:-1], ids[2:]

    out = rejects(check.eagle_training_pairs, edits, capsys, "changed hidden in place", "don't modify your inputs")
    assert "parts" not in out


def test_eagle_training_pairs_takes_numpy_arrays(capsys):
    """The four right slices as NumPy arrays were each called wrong with the slice the learner had taken."""
    assert check.eagle_training_pairs(lambda h, x: (h[:-2].numpy(), x[1:-1].numpy(), h[1:-1].numpy(), x[2:].numpy()))


def test_d2t_offsets_with_the_sign_flipped_are_not_blamed_on_ties(capsys):
    """ids + arange (the sign flipped the other way) was read as a tie-breaking mistake."""
    import torch

    out = rejects(check.d2t_from_counts,
                  lambda c, n: torch.sort(-c, stable=True).indices[:n].sort().values + torch.arange(n), capsys)
    assert "when counts tie" not in out and "do not add it" in out


def test_keep_best_nodes(capsys):
    """EAGLE-2's reranking: the reference and other right answers pass (a loop, tensors, tuples), each planted
    mistake is named by its hint, a malformed return value is said to be one, and a stub is not solved yet."""
    import torch

    assert check.keep_best_nodes(check.reference_keep_best_nodes)

    def loop(values, parents, count):  # by hand: rank with the index as tie-break, then renumber
        ranked = sorted(range(len(values)), key=lambda i: (-float(values[i]), i))[:count]
        kept = sorted(ranked)
        return torch.tensor(kept), tuple(kept.index(parents[i]) if parents[i] >= 0 else -1 for i in kept)

    assert check.keep_best_nodes(loop)
    capsys.readouterr()

    def top(values, n, later=False):
        return sorted(range(len(values)), key=lambda i: (-float(values[i]), -i if later else i))[:n]

    def renumber(kept, parents):
        return [kept.index(parents[i]) if parents[i] in kept else -1 for i in kept]

    for wrong, words in [
            (lambda v, p, n: (top(v, n), renumber(top(v, n), p)), "drafting order"),
            (lambda v, p, n: (sorted(top(v, n)), [p[i] for i in sorted(top(v, n))]), "renumber the parents"),
            (lambda v, p, n: (sorted(top(v, n, True)), renumber(sorted(top(v, n, True)), p)), "keep the earlier node"),
            (lambda v, p, n: (sorted(top([-x for x in v.tolist()], n)),
                              renumber(sorted(top([-x for x in v.tolist()], n)), p)), "HIGHEST value"),
            (lambda v, p, n: (list(range(n)), renumber(list(range(n)), p)), "rank the nodes by value over the whole"),
            # the learner's own ways of writing the mistakes a learner's run met with the generic hint
            (lambda v, p, n: (renumber(sorted(top(v, n)), p), sorted(top(v, n))), "in that order"),
            (lambda v, p, n: (sorted(top(v, n - 1)), renumber(sorted(top(v, n - 1)), p)), "one fewer here"),
            (lambda v, p, n: (sorted(top(v, n + 1)), renumber(sorted(top(v, n + 1)), p)), "one more here"),
            (lambda v, p, n: (sorted(top(v, n)), [max(q, 0) for q in renumber(sorted(top(v, n)), p)]),
             "a child of the root gets parent -1"),
            (lambda v, p, n: (sorted(top(v, n)), [q + 1 for q in renumber(sorted(top(v, n)), p)]),
             "the root is -1: the first kept node is position 0"),
            (lambda v, p, n: (sorted(top(v, n)), [q + 1 if q >= 0 else -1 for q in renumber(sorted(top(v, n)), p)]),
             "so its children get parent 0")]:
        out = rejects(check.keep_best_nodes, wrong, capsys, words, "keep_best_nodes(values=")
        assert "it fits" not in out  # each planted mistake explains every wrong answer, at count 1 and at C too
    rejects(check.keep_best_nodes, lambda v, p, n: sorted(top(v, n)), capsys,
            "return two lists of whole numbers, (kept, new_parents)")
    out = rejects(check.keep_best_nodes, lambda v, p, n: None, capsys, "keep_best_nodes(values=")
    assert "return two lists" not in out  # a missing return gets the harness's own hint
    assert not check.keep_best_nodes(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_keep_best_nodes_names_an_unstable_sort_and_a_dropped_parent(capsys):
    """A learner's torch.argsort(values, descending=True) passed every small case (CPU keeps ties in order up to 16
    elements) and kept other nodes than the reference on 40 ties; a KeyError from renumbering got the generic hint
    instead of being read as a parent that was not kept."""
    import torch

    def unstable(values, parents, count):
        kept = sorted(torch.argsort(torch.as_tensor(values), descending=True)[:count].tolist())
        row = {node: i for i, node in enumerate(kept)}
        return kept, [row[parents[i]] if parents[i] >= 0 else -1 for i in kept]

    values = torch.full((40,), 0.02)
    if sorted(torch.argsort(values, descending=True)[:10].tolist()) != list(range(10)):  # this build's sort: unstable
        out = rejects(check.keep_best_nodes, unstable, capsys, "the same values, other nodes",
                      "is your sort stable?")
        assert "(values=[0.02" in out
    assert check.keep_best_nodes(lambda v, p, n: unstable(v, p, n) if len(v) < 40 else
                                 check.reference_keep_best_nodes(v, p, n))  # the 40 ties are the only new case
    capsys.readouterr()

    def ends_of_the_tie(values, parents, count):  # any build: 5 from each end of the 40 ties, right elsewhere
        if len(values) < 40:
            return check.reference_keep_best_nodes(values, parents, count)
        kept = list(range(5)) + list(range(35, 40))
        return kept, [-1] * len(kept)

    rejects(check.keep_best_nodes, ends_of_the_tie, capsys, "kept nodes [0, 1, 2, 3, 4, 35",
                  "the same values, other nodes", "is your sort stable?")

    def later_tie(values, parents, count):  # the planted fault keeps its own hint: a child left without its parent
        kept = sorted(sorted(range(len(values)), key=lambda i: (-float(values[i]), -i))[:count])
        return kept, [kept.index(parents[i]) if parents[i] in kept else -1 for i in kept]

    rejects(check.keep_best_nodes, later_tie, capsys, "keeping the later one could leave a child without its parent")

    def no_root_guard(values, parents, count):  # the solution's renumbering without its `if parents[i] >= 0`
        kept = sorted(sorted(range(len(values)), key=lambda i: (-float(values[i]), i))[:count])
        row = {node: i for i, node in enumerate(kept)}
        return kept, [row[parents[i]] for i in kept]

    rejects(check.keep_best_nodes, no_root_guard, capsys, "raised KeyError: -1", "-1 is the root's mark")

    def tensor_keys(values, parents, count):  # keys are 0-d tensors: a lookup with an int finds none of them
        kept = torch.sort(torch.sort(-torch.as_tensor(values), stable=True).indices[:count]).values
        row = {node: i for i, node in enumerate(kept)}
        return kept.tolist(), [row[parents[int(i)]] if parents[int(i)] >= 0 else -1 for i in kept]

    rejects(check.keep_best_nodes, tensor_keys, capsys, "raised KeyError", ".tolist() first")

    def lowest(values, parents, count):  # the lowest values: children kept without their parents
        kept = sorted(sorted(range(len(values)), key=lambda i: (float(values[i]), i))[:count])
        row = {node: i for i, node in enumerate(kept)}
        return kept, [row[parents[i]] if parents[i] >= 0 else -1 for i in kept]

    rejects(check.keep_best_nodes, lowest, capsys, "raised KeyError: 0", "either that parent was not kept")


def test_keep_best_nodes_matches_the_drafters_dynamic_tree(pair):
    """On an EAGLE drafter's own candidates (``last_candidates``), the reference keeps exactly the tree the drafter
    verified: the same tokens, the same parents array."""
    from lab.drafters import DynamicTree, EagleDrafter
    from lab.drafters.base import DraftRequest
    from lab.models import forward, new_cache
    from lab.prompts import held_out_prompts

    drafter = EagleDrafter.from_pretrained(pair, tree=DynamicTree(4, 3, 9))
    for text in held_out_prompts()[:2]:
        prompt = pair.encode(text)
        drafter.reset(prompt, hidden=forward(pair.target, prompt[:-1], new_cache(), logits_to_keep=1,
                                             output_hidden_states=True)[1])
        draft = drafter.propose(DraftRequest(prompt, 8))
        found = drafter.last_candidates
        kept, parents = check.reference_keep_best_nodes(found["values"], found["parents"], 8)
        assert [found["tokens"][i] for i in kept] == draft.tokens and parents == draft.parents
        assert len(found["tokens"]) == 3 + 3 * 9


def test_answers_that_leave_the_gpu_are_told_so_where_the_lesson_runs_on_one(monkeypatch, capsys):
    """On a GPU machine the lesson calls these functions on the target's CUDA tensors: a NumPy answer, right on the
    checker's CPU cases, would raise two cells later. The checkers rerun one case on the lesson's device; the meta
    device stands in for CUDA here (it has no data, so it raises where CUDA would refuse NumPy or a CPU tensor)."""
    import torch

    import lab.exercises.harness as harness

    monkeypatch.setattr(harness, "lesson_device", lambda: torch.device("meta"))
    assert check.eagle_training_pairs(lambda h, x: (h[:-2], x[1:-1], h[1:-1], x[2:]))
    out = rejects(check.eagle_training_pairs,
                  lambda h, x: (h[:-2].numpy(), x[1:-1].numpy(), h[1:-1].numpy(), x[2:].numpy()), capsys,
                  "is right on CPU tensors, but with its tensors on meta", "raised TypeError", "leave NumPy out")
    assert "hidden [6, 4]" in out
    assert check.mtp_depth_pairs(lambda x, k: (x[k:-1], x[k + 1:]))
    rejects(check.mtp_depth_pairs, lambda x, k: (torch.as_tensor(x.numpy()[k:-1]), torch.as_tensor(x.numpy()[k + 1:])),
            capsys, "mtp_depth_pairs(ids=", "device=x.device")

    def numpy_rerank(values, parents, count):
        import numpy as np

        kept = sorted(np.argsort(-np.asarray(values), kind="stable")[:count].tolist())
        return kept, [kept.index(parents[i]) if parents[i] >= 0 else -1 for i in kept]

    monkeypatch.setattr(harness, "lesson_device", lambda: None)  # a CPU machine: values only, so it passes
    assert check.keep_best_nodes(numpy_rerank)
    monkeypatch.setattr(harness, "lesson_device", lambda: torch.device("meta"))
    rejects(check.keep_best_nodes, numpy_rerank, capsys, "numpy_rerank(values=[0.6, 0.3", "on meta")


def test_d2t_from_counts_wants_integer_offsets(capsys):
    """A learner's `.float()` passed: engines add d2t to an integer token id."""
    rejects(check.d2t_from_counts, lambda c, n: check.reference_d2t_from_counts(c, n).float(), capsys,
            "returned torch.float32 offsets", "torch.long")
    assert check.d2t_from_counts(lambda c, n: check.reference_d2t_from_counts(c, n).tolist())  # a list of ints


def test_mtp_depth_pairs_off_by_ones_get_hints_that_name_them_without_the_slices(capsys):
    """Every off-by-one met the generic hint, which spelled out both slices ("row i reads ids[i + k] and predicts
    ids[i + k + 1], for i = 0 … T - k - 2"); parts of unequal lengths were not said to be so."""
    for wrong, words in [(lambda x, k: (x[k - 1:-1], x[k:]), "one place early"),
                         (lambda x, k: (x[k + 1:-1], x[k + 2:]), "one place late"),
                         (lambda x, k: (x[k:], x[k + 1:]), "must have the same length"),
                         (lambda x, k: (x[k:-2], x[k + 1:]), "must have the same length"),
                         (lambda x, k: (x[k - 1:-2], x[k + 1:]), "start one place apart, not two"),
                         (lambda x, k: (x[k:-1] + 1, x[k + 1:]), "how long can both slices be")]:
        out = rejects(check.mtp_depth_pairs, wrong, capsys, words, "mtp_depth_pairs(ids=")
        assert "ids[i + k]" not in out and "T - k - 2" not in out and "ids[k:-1]" not in out, out
    out = rejects(check.mtp_depth_pairs, lambda x, k: (x[k:], x[k + 1:]), capsys, "5 tokens read but 4 targets",
                  "the last token of the window has no target")
    assert "expected" not in out, out
    assert check.mtp_depth_pairs(lambda x, k: (x[k:-1].tolist(), x[k + 1:].tolist()))


def test_tie_and_fallback_hints_of_d2t_and_reranking_ask_instead_of_giving_the_code(capsys):
    """The tie hints spelled out torch.sort(-values, stable=True), and the generic hints the whole recipe ("... sort
    those indices ascending ...", "return ids - torch.arange(size)")."""
    import torch

    code = ("torch.sort(-", "stable=True", "torch.arange(size)", "sort those indices ascending", "keep the first count")
    larger_first = lambda c, n: check._top_ids(c, n, smaller_first=False) - torch.arange(n)  # noqa: E731
    topk = lambda c, n: torch.topk(c, n).indices.sort().values - torch.arange(n)  # noqa: E731
    for wrong in (larger_first, topk):
        out = rejects(check.d2t_from_counts, wrong, capsys, "take the smaller id first: is your sort stable?")
        assert not any(text in out for text in code), out
    out = rejects(check.d2t_from_counts, lambda c, n: -torch.arange(n) - 1, capsys,
                  "which ids make the draft vocabulary", "what does d2t[i] hold")
    assert not any(text in out for text in code), out
    out = rejects(check.d2t_from_counts, lambda c, n: check._top_ids(c, n), capsys, "store offsets, not ids")
    assert not any(text in out for text in code), out

    def later_first(values, parents, count):  # the planted tie mistake
        kept = sorted(sorted(range(len(values)), key=lambda i: (-float(values[i]), -i))[:count])
        return kept, [kept.index(parents[i]) if parents[i] in kept else -1 for i in kept]

    def ends_of_the_tie(values, parents, count):  # the tie case only: the pre-check's hint
        if len(values) < 40:
            return check.reference_keep_best_nodes(values, parents, count)
        return list(range(5)) + list(range(35, 40)), [-1] * 10

    for wrong, words in ((later_first, "keep the earlier node: is your sort stable?"),
                         (ends_of_the_tie, "ties must keep the earlier node first: is your sort stable?"),
                         (lambda v, p, n: ([0] * n, [-1] * n), "which count nodes does the verifier get")):
        out = rejects(check.keep_best_nodes, wrong, capsys, words)
        assert not any(text in out for text in code), out
