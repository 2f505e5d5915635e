"""The exercise checkers of lesson 10 (Medusa, token trees and tree attention; lab.exercises.lesson10): the reference
passes, planted mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import torch

from lab.exercises import lesson08
from lab.exercises import lesson10 as check
from lab.trees import depths, tree_attention_mask
from lab.verify import verify_tree_greedy
from tests.helpers import rejects


def stub(*args):
    raise NotImplementedError


def test_tree_mask_without_the_prefix_hint(capsys):
    rejects(check.tree_mask, check._mask_variant("no_prefix"), capsys, "whole committed prefix")
    # the side-by-side rows come with their legend, whichever hint follows
    rejects(check.tree_mask, check._mask_variant("no_prefix"), capsys, "row i is tree node i, the one that attends")
    rejects(check.tree_mask, check._mask_variant("no_self"), capsys, "attends to itself")


def test_tree_mask_must_be_a_tensor(capsys):
    from lab.trees import tree_attention_mask

    # the right pattern as nested lists of bools is not a mask lab.models.forward can use
    rejects(check.tree_mask, lambda p, n: tree_attention_mask(p, n).tolist(), capsys, "bool tensor")


def test_tree_positions_without_prefix_len_hint(capsys):
    from lab.trees import depths

    rejects(check.tree_positions, lambda p, n: depths(p).tolist(), capsys, "add prefix_len")


def test_tree_mask_shape_and_type_get_their_own_hints(capsys):
    from lab.trees import tree_attention_mask

    rejects(check.tree_mask, lambda p, n: tree_attention_mask(p, 0), capsys, "shape (4, 4); expected (4, 7)",
            "prefix_len committed tokens first")
    rejects(check.tree_mask, lambda p, n: tree_attention_mask(p, n).tolist(), capsys, "returned a list",
            "torch.bool")


def test_accepted_path_refuses_a_tensor_and_a_walk_capped_at_three_levels(capsys):
    from lab.verify import verify_tree_greedy

    rejects(check.accepted_path, lambda a, t, p: torch.tensor(verify_tree_greedy(a, t, p).path), capsys,
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

    rejects(check.accepted_path, three_levels, capsys, "deeper than Medusa's 3 heads")


def test_accepted_path_names_tokens_index_that_finds_a_node_on_another_branch(capsys):
    def first_index(argmax, tokens, parents):  # tokens.index: the first node with the token, on any branch
        node, path = -1, []
        while argmax[node + 1] in tokens and parents[tokens.index(argmax[node + 1])] == node:
            node = tokens.index(argmax[node + 1])
            path.append(node)
        return path

    rejects(check.accepted_path, first_index, capsys, "tokens.index(choice) finds the FIRST node")


def test_medusa_loss_with_heads_counted_from_0_gets_its_own_hint(capsys):
    import torch.nn.functional as F

    def zero_based(logits, tokens, decay=0.8):
        loss, span = logits.new_zeros(()), tokens.size(1)
        for k in range(logits.size(2)):
            loss = loss + decay ** k * F.cross_entropy(logits[:, :span - 1 - k, k].reshape(-1, logits.size(-1)),
                                                       tokens[:, 1 + k:].reshape(-1))
        return loss

    rejects(check.medusa_loss, zero_based, capsys, "count the heads from 1", "range(1, K + 1)")


def test_ngram_lookup_and_tokens_per_call_name_the_mistake_they_fit(capsys, target):
    from lab.exercises.lesson10 import reference_tokens_per_call

    def skips_start(context, max_ngram, n_draft):
        for n in range(min(max_ngram, len(context) - 1), 0, -1):
            for i in range(len(context) - n - 1, 0, -1):   # never checks i = 0
                if context[i:i + n] == context[-n:]:
                    return list(context[i + n:i + n + n_draft])
        return []

    rejects(lesson08.ngram_lookup, skips_start, capsys, "including start 0")

    def last_prompt(t, make, ps, m, eos_token_id=None):
        from lab.decode import generate
        for p in ps:  # = instead of +=: only the last prompt's run is left
            g = generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id)
            tokens, calls = len(g.tokens) - 1, g.stats["target_calls"]
        return tokens / calls

    capsys.readouterr()
    assert not check.tokens_per_call(last_prompt, target, [list(range(1, 30)), list(range(30, 60))])
    assert "add up over ALL prompts" in capsys.readouterr().out
    assert check.tokens_per_call(reference_tokens_per_call, target, [list(range(1, 30)), list(range(30, 60))])


def test_tree_positions(capsys):
    assert check.tree_positions(lambda p, n: (depths(p) + n).tolist())
    # a tensor or tuple has the right numbers, but the lesson prepends a position: [prefix_len - 1] + positions
    for container in (lambda v: v, lambda v: tuple(v.tolist()), lambda v: iter(v.tolist())):
        assert not check.tree_positions(lambda p, n, container=container: container(depths(p) + n))
        assert "return a list of int positions" in capsys.readouterr().out
    assert not check.tree_positions(lambda p, n: [n + i for i in range(len(p))])
    assert "DEPTH - 1" in capsys.readouterr().out
    assert not check.tree_positions(lambda p, n: (depths(p) + n + 1).tolist())
    assert "depth 1" in capsys.readouterr().out
    assert not check.tree_positions(lambda p, n: (depths(p) + n - 1).tolist())
    assert "prefix_len - 1" in capsys.readouterr().out
    assert not check.tree_positions(lambda p, n: depths(p).tolist())
    assert not check.tree_positions(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_medusa_loss(capsys):
    import torch.nn.functional as F

    def loss(logits, tokens, decay=0.8, shift=1, weight=lambda k, d: d ** k, reduction="mean", average=False):
        total = 0.0
        for k in range(1, logits.size(2) + 1):
            span = tokens.size(1) - shift - k
            total = total + weight(k, decay) * F.cross_entropy(logits[:, :span, k - 1].reshape(-1, logits.size(-1)),
                                                               tokens[:, shift + k:].reshape(-1), reduction=reduction)
        return total / logits.size(2) if average else total

    # a hand-computed value: one head, uniform logits over 4 tokens -> every cross-entropy is ln 4
    uniform = torch.zeros(1, 3, 1, 4)
    assert torch.isclose(check.reference_medusa_loss(uniform, torch.tensor([[0, 1, 2]]), 0.5),
                         torch.tensor(0.5 * 1.3863), atol=1e-4)
    assert check.medusa_loss(loss)
    capsys.readouterr()
    # the lesson calls .backward() on the result: a float or a detached tensor is refused with its own hint
    assert not check.medusa_loss(lambda lo, t, decay=0.8: float(loss(lo, t, decay)))
    assert "returned a float" in capsys.readouterr().out
    assert not check.medusa_loss(lambda lo, t, decay=0.8: loss(lo, t, decay).detach())
    assert "no gradient" in capsys.readouterr().out
    for wrong, words in [(dict(shift=0), "t + 1 + k"), (dict(weight=lambda k, d: d ** (k - 1)), "decay ** k (k = 1"),
                         (dict(weight=lambda k, d: 1.0), "less sure"), (dict(average=True), "do not divide"),
                         (dict(reduction="sum"), "MEAN cross-entropy")]:
        assert not check.medusa_loss(lambda lo, t, decay=0.8, wrong=wrong: loss(lo, t, decay, **wrong))
        assert words in capsys.readouterr().out, wrong
    assert not check.medusa_loss(stub)
    assert "not solved yet" in capsys.readouterr().out


def _hand_written_medusa_loss(every_position: bool):
    """Medusa-1's loss written out with log_softmax and gather, the -100 labels masked out of the sum; each head's
    mean divides by every position (``every_position``: the planted mistake) or by the labelled ones."""
    def loss(logits, tokens, decay=0.8):
        total = logits.new_zeros(())
        for k in range(1, logits.size(2) + 1):
            span = tokens.size(1) - 1 - k
            labels = tokens[:, 1 + k:]
            log_probs = logits[:, :span, k - 1].log_softmax(-1)
            picked = log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            keep = labels != -100
            total = total + decay ** k * -(picked * keep).sum() / (labels.numel() if every_position else keep.sum())
        return total
    return loss


def test_medusa_loss_that_counts_ignored_labels_in_the_mean(capsys):
    """A hand-written mean over every position (the -100 labels masked out of the sum but not of the count) got
    the generic hint, which did not mention ignored labels."""
    out = rejects(check.medusa_loss, _hand_written_medusa_loss(every_position=True), capsys, "-100",
                  "dividing by the labelled positions only")
    assert "head 1 looks one token further" not in out
    assert check.medusa_loss(_hand_written_medusa_loss(every_position=False)), capsys.readouterr().out


def test_tree_mask(capsys):
    assert check.tree_mask(tree_attention_mask)
    assert not check.tree_mask(check._mask_variant("causal"))
    assert "siblings" in capsys.readouterr().out
    assert not check.tree_mask(check._mask_variant("parent_only"))
    assert "ALL its ancestors" in capsys.readouterr().out
    assert not check.tree_mask(check._mask_variant("no_self"))
    assert not check.tree_mask(lambda p, n: tree_attention_mask(p, n).float())  # must be a bool mask
    assert "torch.bool" in capsys.readouterr().out
    assert not check.tree_mask(lambda p, n: tree_attention_mask(p, n).int())
    out = capsys.readouterr().out
    assert "right pattern" in out and "torch.bool" in out and ".bool()" in out

    def additive(p, n):
        return torch.zeros(len(p), n + len(p)).masked_fill(~tree_attention_mask(p, n), float("-inf"))

    assert not check.tree_mask(additive)
    out = capsys.readouterr().out
    assert "additive mask" in out and "torch.bool" in out
    assert not check.tree_mask(lambda p, n: additive(p, n).clamp(min=-1e9))  # a large negative number instead
    assert "additive mask" in capsys.readouterr().out


def test_accepted_path(capsys):
    assert check.accepted_path(lambda a, t, p: verify_tree_greedy(a, t, p).path)
    for kind, word in (("first_child", "EVERY child"), ("row_is_node", "row i + 1"), ("one_level", "descending"),
                       ("child_row", "PARENT's row"), ("any_branch", "CHILDREN are candidates")):
        assert not check.accepted_path(check._path_variant(kind))
        assert word in capsys.readouterr().out
    assert not check.accepted_path(lambda a, t, p: None)
    assert "did you forget a `return` statement?" in capsys.readouterr().out


def test_accepted_path_names_a_row_two_past_the_node(capsys):
    """A learner read the row after the accepted node as path[-1] + 2 and was told to "keep descending", which the
    walk already did."""
    def two_past(argmax, tokens, parents):
        path = []
        while True:
            node, row = (path[-1], path[-1] + 2) if path else (-1, 0)
            kids = [i for i, p in enumerate(parents) if p == node]
            match = next((c for c in kids if row < len(argmax) and tokens[c] == argmax[row]), None)
            if match is None:
                return path
            path.append(match)

    assert not check.accepted_path(two_past)
    out = capsys.readouterr().out
    assert "in row i + 1, not i + 2" in out and "keep descending" not in out, out


def test_accepted_path_refuses_a_walk_that_matches_nodes_on_another_branch(capsys):
    """A walk taking the next node with the right token at the next depth, whatever its parent, used to pass: no
    case had the same token on two branches (the default Medusa tree does)."""
    def depth_scan(argmax, tokens, parents):
        level, node, path = depths(parents).tolist(), -1, []  # 0-based levels
        while True:
            want = level[node] + 1 if node >= 0 else 0
            match = next((c for c in range(len(tokens)) if level[c] == want and tokens[c] == argmax[node + 1]), None)
            if match is None:
                return path
            path.append(match)
            node = match

    assert depths([-1, -1, 0, 1]).tolist() == [0, 0, 1, 1]
    assert not check.accepted_path(depth_scan)
    out = capsys.readouterr().out
    assert "returned [1, 2]; expected [1, 3]" in out and "CHILDREN are candidates" in out


def test_tokens_per_call(capsys, target):
    from lab.exercises.lesson10 import reference_tokens_per_call

    prompts = [list(range(1, 30)), list(range(30, 60))]
    assert check.tokens_per_call(reference_tokens_per_call, target, prompts)

    def mean_of_ratios(t, make, ps, m):
        from lab.decode import generate
        runs = [generate(t, p, drafter=make(), max_new_tokens=m) for p in ps]
        return sum(g.stats["tokens_per_target_call"] for g in runs) / len(runs)

    assert not check.tokens_per_call(mean_of_ratios, target, prompts)
    assert "no eos_token_id parameter" in capsys.readouterr().out  # the old four-argument signature

    def mean_of_ratios_eos(t, make, ps, m, eos_token_id=None):
        from lab.decode import generate
        runs = [generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id) for p in ps]
        return sum(g.stats["tokens_per_target_call"] for g in runs) / len(runs)

    assert not check.tokens_per_call(mean_of_ratios_eos, target, prompts)
    assert "pool before dividing" in capsys.readouterr().out
    assert not check.tokens_per_call(lambda t, make, ps, m, eos_token_id=None:
                                     reference_tokens_per_call(t, make, ps, m, eos_token_id) // 1, target, prompts)
    assert "//" in capsys.readouterr().out

    def runs_of(t, make, ps, m, eos_token_id):
        from lab.decode import generate
        return [generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id) for p in ps]

    def with_draft_calls(t, make, ps, m, eos_token_id=None):
        runs = runs_of(t, make, ps, m, eos_token_id)
        return sum(len(g.tokens) for g in runs) / sum(g.stats["target_calls"] + g.stats["draft_calls"] for g in runs)

    assert not check.tokens_per_call(with_draft_calls, target, prompts)
    out = capsys.readouterr().out
    assert "target calls only" in out and "//" not in out

    def requested(t, make, ps, m, eos_token_id=None):  # right on every run that does not stop early
        runs = runs_of(t, make, ps, m, eos_token_id)
        return m * len(ps) / sum(g.stats["target_calls"] for g in runs)

    assert not check.tokens_per_call(requested, target, prompts)
    out = capsys.readouterr().out
    assert "actually produced" in out and "eos_token_id=" in out
    assert not check.tokens_per_call(
        lambda t, make, ps, m, eos_token_id=None: reference_tokens_per_call(t, make, ps, m), target, prompts)
    assert "pass eos_token_id on to generate" in capsys.readouterr().out
    assert not check.tokens_per_call(stub, target, prompts)
    assert "not solved yet" in capsys.readouterr().out


def test_accepted_path_row_zero_and_token_ids_get_their_own_hints(capsys):
    """A walk that compares every level with target_argmax[0] does descend, and used to be told "keep descending";
    a walk that returns the accepted tokens instead of their node indices got only the generic hint."""
    def row_zero(argmax, tokens, parents):
        node, path = -1, []
        while True:
            match = next((c for c, p in enumerate(parents) if p == node and tokens[c] == argmax[0]), None)
            if match is None:
                return path
            path.append(match)
            node = match

    def token_ids(argmax, tokens, parents):
        return [tokens[i] for i in verify_tree_greedy(argmax, tokens, parents).path]

    out = rejects(check.accepted_path, row_zero, capsys, "its PARENT's row, target_argmax[parent + 1]")
    assert "keep descending" not in out
    rejects(check.accepted_path, token_ids, capsys, "INDICES in tokens", "not their token ids")
    # the case that tells the row-0 walk from a walk that stops after one level: a chain of three 5s
    case = ([5, 5, 8, 1], [5, 5, 5], [-1, 0, 1])
    assert case in check._path_cases()
    assert verify_tree_greedy(*case).path == [0, 1]
    assert row_zero(*case) == [0, 1, 2] and check._path_variant("one_level")(*case) == [0]
    rejects(check.accepted_path, check._path_variant("one_level"), capsys, "keep descending")


def test_tokens_per_call_counting_accepted_plus_one_per_step(capsys, target):
    """Summing num_accepted + 1 over the decode steps counts a last step that generate cut at EOS as whole (the
    lesson's wording once invited it): it gets a hint about the cut last step."""
    from lab.decode import generate

    def accepted_plus_one(t, make, ps, m, eos_token_id=None):
        runs = [generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id) for p in ps]
        return (sum(s.num_accepted + 1 for g in runs for s in g.decode_steps)
                / sum(len(g.decode_steps) for g in runs))

    def emitted(t, make, ps, m, eos_token_id=None):   # the steps' own emitted tokens: right
        runs = [generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id) for p in ps]
        return sum(len(s.emitted) for g in runs for s in g.decode_steps) / sum(len(g.decode_steps) for g in runs)

    prompts = [list(range(1, 30)), list(range(30, 60))]
    rejects(lambda fn: check.tokens_per_call(fn, target, prompts), accepted_plus_one, capsys,
            "not num_accepted + 1", "cuts the last step at max_new_tokens and after EOS")
    assert check.tokens_per_call(emitted, target, prompts)


def test_accepted_path_accepts_a_walk_with_a_token_to_child_dict_per_node(capsys):
    """A case gave two siblings the same token (nodes 2 and 3 both 6 under node 0), which no real tree has, so a right
    walk that keeps a token -> child dict per node (the later sibling wins) was told "returned [0, 3]; expected
    [0, 2, 4, 5]". Siblings now differ in every case."""
    def dict_walk(target_argmax, tokens, parents):
        children = {}
        for i, p in enumerate(parents):
            children.setdefault(p, {})[tokens[i]] = i
        node, path = -1, []
        while target_argmax[node + 1] in children.get(node, {}):
            node = children[node][target_argmax[node + 1]]
            path.append(node)
        return path

    assert check.accepted_path(dict_walk)
    assert "15 trees walked exactly as greedy verification does" in capsys.readouterr().out
    for _, tokens, parents in check._path_cases():
        assert len(set(zip(parents, tokens))) == len(tokens)  # no two siblings share a token
    case = ([4, 6, 0, 7, 0, 8, 1], [4, 5, 6, 9, 7, 8], [-1, -1, 0, 0, 2, 4])  # depth 4, with a sibling at depth 2
    assert case in check._path_cases() and dict_walk(*case) == verify_tree_greedy(*case).path == [0, 2, 4, 5]


def test_fallback_hints_explain_without_printing_the_code(capsys):
    """The generic hints of medusa_loss and tokens_per_call printed the one-line answers."""
    out = rejects(check.medusa_loss, lambda logits, tokens, decay: (logits.sum() * 0 + 1.0), capsys,
                  "1 + k places after each position", "decay to the power k")
    assert "F.cross_entropy(logits[" not in out and "tokens[:, 1 + k:]" not in out


def test_slips_from_a_learners_run_get_their_own_hints(capsys, target):
    """Each of these got the generic hint in a learner's run of lesson 10."""
    import torch.nn.functional as F

    from lab.decode import generate
    from lab.exercises.lesson10 import reference_tokens_per_call

    def medusa(shift_logits=False, fixed=False):
        def loss(logits, tokens, decay=0.8):
            total = logits.new_zeros(())
            for k in range(1, logits.size(2) + 1):
                span = tokens.size(1) - 1 - k
                head, later = ((logits[:, 1 + k:, k - 1], tokens[:, :span]) if shift_logits else
                               (logits[:, :span, k - 1], tokens[:, 1 + k:]))
                total = total + (0.8 if fixed else decay) ** k * F.cross_entropy(
                    head.reshape(-1, logits.size(-1)), later.reshape(-1))
            return total
        return loss

    assert check.medusa_loss(medusa()), capsys.readouterr().out
    rejects(check.medusa_loss, medusa(fixed=True), capsys, "not a fixed 0.8")
    rejects(check.medusa_loss, medusa(shift_logits=True), capsys, "a LATER token")

    def walk(with_root=False, bonus=False):
        def fn(argmax, tokens, parents):
            path = verify_tree_greedy(argmax, tokens, parents).path
            if bonus:
                return path + [argmax[path[-1] + 1 if path else 0]]
            return [-1] + path if with_root else path
        return fn

    rejects(check.accepted_path, walk(with_root=True), capsys, "the root (-1) is the last committed token")
    rejects(check.accepted_path, walk(bonus=True), capsys, "the lesson adds it after the path itself")

    prompts = [list(range(1, 30)), list(range(30, 60))]

    def returns_in_loop(t, make, ps, m, eos_token_id=None):
        for p in ps:
            g = generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id)
            return (len(g.tokens) - 1) / g.stats["target_calls"]

    def every_record(t, make, ps, m, eos_token_id=None):
        runs = [generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id) for p in ps]
        return sum(len(g.tokens) - 1 for g in runs) / sum(len(g.steps) for g in runs)

    def rounded(t, make, ps, m, eos_token_id=None):
        return round(reference_tokens_per_call(t, make, ps, m, eos_token_id), 2)

    for fn, phrase in ((returns_in_loop, "inside the loop"), (every_record, "prefill's record"),
                       (rounded, "round only where you print it")):
        out = rejects(lambda f: check.tokens_per_call(f, target, prompts), fn, capsys, phrase)
        assert " 1 prompts" not in out, out


def test_medusa_loss_with_weights_made_on_the_cpu_is_told_where_the_lesson_runs_on_a_gpu(monkeypatch, capsys):
    """A vectorised loss whose decay weights come from torch.arange on the CPU is right on CPU tensors, and raises
    when the lesson trains on the GPU. The meta device stands in for CUDA (it refuses a CPU tensor beside its own
    as CUDA does); on a CPU-only machine the check does not run."""
    import torch
    import torch.nn.functional as F

    import lab.exercises.harness as harness

    def vectorised(logits, tokens, decay=0.8):
        heads = logits.size(2)
        losses = torch.stack([F.cross_entropy(logits[:, :tokens.size(1) - 1 - k, k - 1].reshape(-1, logits.size(-1)),
                                              tokens[:, 1 + k:].reshape(-1)) for k in range(1, heads + 1)])
        return (decay ** torch.arange(1, heads + 1) * losses).sum()

    assert check.medusa_loss(vectorised)  # CPU only: nothing to tell
    monkeypatch.setattr(harness, "lesson_device", lambda: torch.device("meta"))
    rejects(check.medusa_loss, vectorised, capsys, "is right on CPU tensors, but with its tensors on meta",
            "raised RuntimeError", "torch.arange(k, device=logits.device)")

    def on_the_device(logits, tokens, decay=0.8):
        heads = logits.size(2)
        losses = torch.stack([F.cross_entropy(logits[:, :tokens.size(1) - 1 - k, k - 1].reshape(-1, logits.size(-1)),
                                              tokens[:, 1 + k:].reshape(-1)) for k in range(1, heads + 1)])
        return (decay ** torch.arange(1, heads + 1, device=logits.device) * losses).sum()

    assert check.medusa_loss(on_the_device)


def test_a_learners_slips_of_lessons_10_get_their_own_hints(capsys, target):
    """A learner's run of lesson 10: a transposed tree mask, a softmax before F.cross_entropy and F.nll_loss on raw
    logits met the generic hint; a denominator of target_calls + 1 was told about gen.steps, which it never read."""
    import torch.nn.functional as F

    def transposed(parents, prefix_len):  # mask[ancestor, node] instead of mask[node, ancestor]
        mask = tree_attention_mask(parents, prefix_len).clone()
        mask[:, prefix_len:] = mask[:, prefix_len:].T.clone()
        return mask

    rejects(check.tree_mask, transposed, capsys, "the tree part is transposed", "lower-triangular")

    def loss_with(kind):
        def loss(logits, tokens, decay=0.8):
            total = logits.new_zeros(())
            for k in range(1, logits.size(2) + 1):
                scores = logits[:, :tokens.size(1) - 1 - k, k - 1].reshape(-1, logits.size(-1))
                gold = tokens[:, 1 + k:].reshape(-1)
                ce = F.cross_entropy(scores.softmax(-1), gold) if kind == "softmax" else F.nll_loss(scores, gold)
                total = total + decay ** k * ce
            return total
        return loss

    rejects(check.medusa_loss, loss_with("softmax"), capsys, "F.cross_entropy takes the raw logits")
    rejects(check.medusa_loss, loss_with("nll"), capsys, "F.nll_loss expects log-probabilities")

    from lab.decode import generate

    def plus_one(t, make, ps, m, eos_token_id=None):
        runs = [generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_token_id) for p in ps]
        return sum(len(g.tokens) - 1 for g in runs) / sum(g.stats["target_calls"] + 1 for g in runs)

    prompts = [list(range(1, 30)), list(range(30, 60))]
    rejects(lambda f: check.tokens_per_call(f, target, prompts), plus_one, capsys, "no + 1")


def test_accepted_path_rows_read_at_the_childs_index_or_at_the_nodes_get_their_own_hints(capsys):
    """A learner's run: comparing each child with target_argmax[c] (the rows read as if aligned with tokens) was told
    to look at EVERY child, and target_argmax[node] (row -1, the LAST row, at the top) to use the PARENT's row."""
    def walk(row_of):
        def fn(target_argmax, tokens, parents):
            node, path = -1, []
            while True:
                kids = [c for c, p in enumerate(parents) if p == node]
                match = next((c for c in kids if tokens[c] == target_argmax[row_of(c, node)]), None)
                if match is None:
                    return path
                path.append(match)
                node = match
        return fn

    for row_of, words in ((lambda c, node: c, "not aligned with tokens"), (lambda c, node: node, "Python's LAST row")):
        out = rejects(check.accepted_path, walk(row_of), capsys, words, "after node i is in row i + 1")
        assert "EVERY child" not in out and "PARENT's row" not in out and "it fits" not in out, out
        assert "target_argmax[node + 1]" not in out and "target_argmax[parent + 1]" not in out, out
    assert check.accepted_path(walk(lambda c, node: node + 1)), capsys.readouterr().out
    for kind in ("aligned", "row_of_node"):
        rejects(check.accepted_path, check._path_variant(kind), capsys, "row i + 1")


def test_accepted_path_generic_hint_asks_instead_of_giving_the_walk(capsys):
    """The generic hint spelled out the whole walk (rows, the comparison, the descent)."""
    out = rejects(check.accepted_path, lambda a, t, p: [len(t) - 1] if t else [], capsys,
                  "walk down from the top one level at a time", "which row of target_argmax")
    assert "target_argmax[row]" not in out and "row = node + 1" not in out, out


def test_tree_mask_columns_without_prefix_len_or_one_to_the_left_get_their_own_hints(capsys):
    """A learner's run: mask[i, j] for node i's ancestors and itself (no prefix_len) and its own column at
    prefix_len + i - 1 met the generic hint beside two bool tensors printed as 28 to 56 Trues and Falses."""
    def mask(parents, prefix_len, offset=True, self_shift=0):
        n = len(parents)
        out = torch.zeros(n, prefix_len + n, dtype=torch.bool)
        out[:, :prefix_len] = True
        for i in range(n):
            out[i, (prefix_len if offset else 0) + i + self_shift] = True
            j = parents[i]
            while j >= 0:
                out[i, (prefix_len if offset else 0) + j] = True
                j = parents[j]
        return out

    out = rejects(check.tree_mask, lambda p, n: mask(p, n, offset=False), capsys, "land in the prefix's columns",
                  "shifted by prefix_len")
    assert "it fits" not in out and "True, " not in out, out
    assert "    returned   expected\n    111|0000   111|1000\n    111|0000   111|1100\n" in out, out
    out = rejects(check.tree_mask, lambda p, n: mask(p, n, self_shift=-1), capsys, "one column too far left")
    assert "it fits" not in out and "attends to itself" not in out, out
    assert check.tree_mask(mask), capsys.readouterr().out
    rejects(check.tree_mask, check._mask_variant("no_offset"), capsys, "shifted by prefix_len")
    rejects(check.tree_mask, check._mask_variant("self_off_by_one"), capsys, "one column too far left")


def test_tree_mask_failures_show_the_masks_as_rows_of_0_and_1(capsys):
    """The masks of a failure are shown one row per node, the learner's beside the expected one, not as a nested
    list of bools on one line."""
    out = rejects(check.tree_mask, check._mask_variant("causal"), capsys, "siblings")
    assert "tensor(" not in out and "True" not in out, out
    assert check._mask_rows(tree_attention_mask([-1, -1, 1], 2)) == "11|100\n11|010\n11|011"


def test_medusa_loss_with_view_on_a_slice_is_told_to_reshape(capsys):
    """A learner's .view(-1, V) on the sliced logits raised torch's "view size is not compatible" and met the maths
    hint (head k guesses ...), though the maths was right."""
    import torch.nn.functional as F

    def loss(logits, tokens, decay=0.8, flat=lambda x, *shape: x.view(*shape)):
        total = logits.new_zeros(())
        for k in range(1, logits.size(2) + 1):
            span = tokens.size(1) - 1 - k
            total = total + decay ** k * F.cross_entropy(flat(logits[:, :span, k - 1], -1, logits.size(-1)),
                                                         flat(tokens[:, 1 + k:], -1))
        return total

    out = rejects(check.medusa_loss, loss, capsys, "view size is not compatible", "memory layout, not the maths",
                  ".reshape(...)")
    assert "guesses the token" not in out, out
    assert check.medusa_loss(lambda lo, t, decay=0.8: loss(lo, t, decay, flat=lambda x, *shape: x.reshape(*shape)))
