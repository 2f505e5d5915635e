"""EAGLE-2's dynamic draft tree (lab.drafters.dynamic_tree; Li et al. 2024, §4; SGLang's topk > 1): the settings'
ranges, expansion and reranking on hand-computed values, and the tree an EAGLE drafter grows with it on the bundled
pair (the decoding oracles run in tests/lab/drafters/test_eagle.py and tests/lab/test_real_pair_oracles.py)."""
from pathlib import Path

import pytest
import torch

from lab.drafters import DynamicTree, Eagle3Drafter, EagleDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.dynamic_tree import expand_level, rerank, top_children
from lab.models import forward, new_cache
from lab.trees import check_parents, depths

pytestmark = pytest.mark.usefixtures("one_thread")
ENGINES = Path(__file__).resolve().parents[2] / "data" / "engines"  # the engines' pinned sources


def test_defaults_are_sglangs_for_a_llama_target_and_bad_settings_name_their_range():
    tree = DynamicTree()
    assert (tree.num_steps, tree.topk, tree.num_draft_tokens) == (5, 4, 8)
    # as SGLang 0.5.23 picks them for a Llama target (SmolLM2's architecture) when no shape is given
    hook = ENGINES / "sglang-0.5.23" / "sglang" / "srt" / "arg_groups" / "speculative_hook.py"
    assert 'if model_arch in ["LlamaForCausalLM"]:\n        return (5, 4, 8)' in hook.read_text()
    assert tree.drafted == 7 and tree.candidates == 4 + 4 * 16
    assert DynamicTree(1, 1, 2).candidates == 1
    import numpy as np

    given = DynamicTree(np.int64(3), torch.tensor(2), 7)  # counts of other integer types are stored as ints
    assert given == DynamicTree(3, 2, 7) and hash(given) == hash(DynamicTree(3, 2, 7))
    assert type(given.num_steps) is int and type(given.topk) is int
    for bad, field in (({"num_steps": 0}, "num_steps"), ({"topk": 0}, "topk"), ({"num_draft_tokens": 1},
                       "num_draft_tokens"), ({"topk": 2.0}, "topk"), ({"num_steps": True}, "num_steps")):
        with pytest.raises(ValueError, match=field):
            DynamicTree(**bad)
    # more nodes than the expansion drafts: 2 + 1·4 = 6 candidates, so at most 7 tokens with the root
    assert DynamicTree(2, 2, 7).drafted == 6
    with pytest.raises(ValueError, match=r"num_draft_tokens must be at most 1 \+ topk \+ \(num_steps - 1\)·topk² = 7"):
        DynamicTree(2, 2, 8)
    assert DynamicTree(1, 256, 2).topk == 256
    with pytest.raises(ValueError, match="topk"):
        DynamicTree(1, 257, 2)  # a level would score 257² children


def test_expansion_multiplies_values_and_expands_the_best_children():
    scores = torch.tensor([0.6, 0.3])                  # two expanded nodes
    probs = torch.tensor([[0.1, 0.5, 0.4, 0.0],        # node 0's children: 1 (0.30), 2 (0.24)
                          [0.9, 0.0, 0.05, 0.05]])     # node 1's children: 0 (0.27), then 2 and 3 tie at 0.015
    level = expand_level(scores, probs, 2)
    assert level["tokens"].tolist()[:3] == [1, 2, 0]
    torch.testing.assert_close(level["scores"][:3], torch.tensor([0.30, 0.24, 0.27]))
    assert level["rows"].tolist() == [0, 0, 1, 1]
    assert level["chosen"].tolist() == [0, 2]          # values 0.30 and 0.27; 0.24 is not expanded
    ids, values = top_children(probs, 3)
    assert ids.tolist() == [[1, 2, 0], [0, 2, 3]] or ids.tolist() == [[1, 2, 0], [0, 3, 2]]
    torch.testing.assert_close(values[0], torch.tensor([0.5, 0.4, 0.1]))
    with pytest.raises(ValueError, match="topk"):
        top_children(probs, 5)
    with pytest.raises(ValueError, match="same f"):
        expand_level(scores[:1], probs, 2)


def test_rerank_keeps_the_most_valuable_nodes_in_drafting_order_ties_to_the_earlier():
    #             0     1     2     3      4      5
    scores = torch.tensor([0.5, 0.3, 0.2, 0.25, 0.3, 0.1])
    parents = [-1, -1, -1, 0, 1, 3]
    assert rerank(scores, parents, 3) == [0, 1, 4]     # 0.5, 0.3, 0.3: the tie with node 1 is kept in order
    assert rerank(scores, parents, 4) == [0, 1, 3, 4]
    assert rerank(scores, parents, 6) == list(range(6))
    check_parents([-1, -1, 0, 1])  # what the drafter hands the verifier after renumbering [0, 1, 3, 4]
    # equal values: the parent (earlier) goes first, so a child never comes without it
    assert rerank(torch.tensor([0.4, 0.4, 0.4]), [-1, 0, 1], 2) == [0, 1]
    with pytest.raises(RuntimeError, match="without its parent"):
        rerank(torch.tensor([0.1, 0.9]), [-1, 0], 1)   # a child valued above its parent
    for bad in (0, 7):
        with pytest.raises(ValueError, match="count"):
            rerank(scores, parents, bad)


def _reset(drafter, pair, prompt):
    hidden = forward(pair.target, prompt[:-1], new_cache(), logits_to_keep=1, output_hidden_states=True,
                     hidden_layers=drafter.hidden_layers)[1]
    drafter.reset(prompt, hidden=hidden)


@pytest.mark.parametrize("cls", [EagleDrafter, Eagle3Drafter])
def test_the_drafters_tree_has_the_settings_shape(pair, prompts, cls):
    drafter = cls.from_pretrained(pair, tree=DynamicTree())
    assert drafter.n_draft == 5 and "DynamicTree(num_steps=5, topk=4, num_draft_tokens=8)" in repr(drafter)
    for prompt in prompts:
        _reset(drafter, pair, prompt)
        draft = drafter.propose(DraftRequest(prompt, 10))
        assert len(draft.tokens) == 7 and draft.calls == 1 + 4   # the true pairs, then one per level after the first
        assert draft.probs is None                                # deterministic: verified as one-hot
        check_parents(draft.parents)
        assert max(depths(draft.parents).tolist()) <= 5
        # the first level holds the root's best tokens: the greedy token is always kept
        with torch.inference_mode():
            greedy = int(torch.argmax(drafter.model.logits(drafter._root)))
        first = [t for t, p in zip(draft.tokens, draft.parents) if p == -1]
        assert first[0] == greedy
        assert drafter.cached_pairs() == len(prompt) - 1         # every fed node rolled back
        capped = drafter.propose(DraftRequest(prompt, 2))         # max_tokens caps the depth
        assert max(depths(capped.parents).tolist()) <= 2 and capped.calls == 1


def test_top1_dynamic_tree_is_the_greedy_chain(pair, prompts):
    """With topk = 1 the expansion follows the argmax path: the same tokens as a chain of num_steps."""
    for prompt in prompts:
        chain = EagleDrafter.from_pretrained(pair, n_draft=4)
        _reset(chain, pair, prompt)
        tree = EagleDrafter.from_pretrained(pair, tree=DynamicTree(4, 1, 5))
        _reset(tree, pair, prompt)
        draft = tree.propose(DraftRequest(prompt, 10))
        assert draft.tokens == chain.propose(DraftRequest(prompt, 10)).tokens
        assert draft.parents == [-1, 0, 1, 2]


def test_topk_above_the_draft_vocabulary_and_contradicting_n_draft_are_refused(pair):
    model = EagleDrafter.from_pretrained(pair).model
    from lab.drafters import MedusaDrafter

    # a dynamic tree only where it is taken, an instance, not the class; a string or dict is not read letter by letter
    with pytest.raises(TypeError, match="DynamicTree instance, e.g. tree=DynamicTree()"):
        EagleDrafter(pair.target, model, tree=DynamicTree)
    for wrong in (DynamicTree(), DynamicTree, "dynamic", {"num_steps": 5}):
        with pytest.raises(TypeError, match="tree must be a list of rank paths.*EAGLE and EAGLE-3 drafters"):
            MedusaDrafter.from_pretrained(pair, tree=wrong)
    for wrong in ("dynamic", {"num_steps": 5}):
        with pytest.raises(TypeError, match="^tree must be a list of rank paths"):
            EagleDrafter(pair.target, model, tree=wrong)
    # a topk above the draft's vocabulary: a tiny target of 64 tokens
    from lab.drafters.eagle import EagleDraftModel
    from tests.helpers import tiny_llama

    tiny = tiny_llama(1, layers=1)
    small = EagleDraftModel(tiny, {"width": 32, "heads": 4, "kv_heads": 4, "intermediate": 64})
    assert EagleDrafter(tiny, small, tree=DynamicTree(1, 64, 2)).dynamic.topk == 64
    with pytest.raises(ValueError, match=r"tree.topk must be at most the draft's vocabulary \(64 tokens\), got 65"):
        EagleDrafter(tiny, small, tree=DynamicTree(1, 65, 2))
    with pytest.raises(ValueError, match="contradicts tree"):
        EagleDrafter(pair.target, model, n_draft=3, tree=DynamicTree())
    assert EagleDrafter(pair.target, model, n_draft=5, tree=DynamicTree()).n_draft == 5


def test_the_pair_cards_tree_shape_table_states_the_committed_run():
    """lab/assets/smollm2-135m/README.md's table of draft-tree shapes is tree_shapes.json's (tools/tree_shapes.py):
    every speedup and tokens per call, and the bold cell of each row is that row's fastest."""
    import json

    from lab.assets import SMOLLM2_DIR

    run = json.loads((SMOLLM2_DIR / "tree_shapes.json").read_text())
    card = (SMOLLM2_DIR / "README.md").read_text()
    section = card.split("## Draft-tree shapes for the EAGLE-3 draft", 1)[1].split("\n## ", 1)[0]
    assert run["date"] in " ".join(section.split()) and run["dtype"] == "torch.bfloat16"
    names = {"chat": "chat", "code": "code", "structured": "structured", "copy_edit": "copy/edit"}
    for kind, rows in run["kinds"].items():
        line = next(x for x in section.splitlines() if x.startswith(f"| {names[kind]} |"))
        cells = [c.strip() for c in line.strip("|").split("|")[1:]]
        drafters = [r for r in rows["rows"] if r["method"] != "autoregressive"]
        assert len(cells) == len(drafters) == 6
        fastest = max(r["speedup"] for r in drafters)
        for cell, row in zip(cells, drafters):
            speed, per_call = cell.replace("**", "").replace("×", "").replace("(", "").replace(")", "").split()
            assert float(speed) == row["speedup"] and float(per_call) == round(row["tokens_per_target_call"], 2)
            assert cell.startswith("**") == (row["speedup"] == fastest), (kind, row["method"])


def test_rerank_and_top_children_name_bad_input():
    """A tester's bad parents and NaN scores were reported as "node 1 is kept without its parent 5", a list of
    probabilities as an AttributeError."""
    with pytest.raises(ValueError, match=r"parents\[1\] must be -1 .* got 5"):
        rerank(torch.ones(3), [-1, 5, 1], 2)
    with pytest.raises(ValueError, match="scores contains NaN"):
        rerank(torch.tensor([1.0, float("nan"), 0.5]), [-1, 0, 1], 2)
    with pytest.raises(TypeError, match=r"probs must be a float tensor \[rows, V\], got list"):
        top_children([[0.5, 0.5]], 1)
    assert rerank(torch.tensor([1.0, 0.5, 0.2]), [-1, 0, 1], 2) == [0, 1]
