"""EarlyExitDrafter: the target's first layers + its final norm and head, sharing its weights."""
import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import EarlyExitDrafter
from lab.drafters.early_exit import truncated_model
from lab.models import forward, new_cache


def test_truncated_model_shares_weights_and_matches_a_manual_early_exit(target):
    shallow = truncated_model(target, 1)
    assert shallow.model.layers[0] is target.model.layers[0] and shallow.lm_head is target.lm_head
    assert len(shallow.model.layers) == 1 and len(target.model.layers) == 2  # the target is untouched
    assert all(p.device.type != "meta" for p in shallow.parameters())
    ids = [4, 8, 15, 16, 23]
    out = target(input_ids=torch.tensor([ids], device=target.device), output_hidden_states=True)
    manual = target.lm_head(target.model.norm(out.hidden_states[1]))[0].float()  # after layer 1, then norm + head
    torch.testing.assert_close(forward(shallow, ids, new_cache()), manual, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("num_layers", [0, 2, -1, 1.5, True])
def test_num_layers_range(target, num_layers):
    with pytest.raises(ValueError, match="num_layers"):
        EarlyExitDrafter(target, num_layers=num_layers)


def test_a_model_pair_is_told_to_pass_its_target(target):
    from types import SimpleNamespace

    with pytest.raises(ValueError, match=r"pass its target, EarlyExitDrafter\(pair.target, num_layers\)"):
        EarlyExitDrafter(SimpleNamespace(target=target, draft=None), 1)
    with pytest.raises(ValueError, match="Llama-style model$"):  # anything else: no pair hint
        EarlyExitDrafter(torch.nn.Linear(2, 2), 1)


def test_greedy_parity_eos_and_exact_length(target):
    prompt = [1, 2, 3, 4, 5]
    ref = autoregressive(target, prompt, max_new_tokens=30).tokens
    drafter = EarlyExitDrafter(target, num_layers=1, n_draft=3)
    for _ in range(2):  # the same drafter twice: no state leaks between calls
        assert generate(target, prompt, drafter=drafter, max_new_tokens=30).tokens == ref
    for m in (1, 2, 7):
        assert generate(target, prompt, drafter=drafter, max_new_tokens=m).tokens == ref[:m]
    eos = ref[5]
    assert generate(target, prompt, drafter=drafter, max_new_tokens=30, eos_token_id=eos).tokens == \
        ref[: ref.index(eos) + 1]


def test_bundled_target_early_exit_drafts_and_stays_exact(pair):
    from lab.prompts import held_out_prompts

    prompt = pair.encode(held_out_prompts()[0])
    ref = autoregressive(pair.target, prompt, max_new_tokens=40).tokens
    gen = generate(pair.target, prompt, drafter=EarlyExitDrafter(pair.target, num_layers=3), max_new_tokens=40)
    assert gen.tokens == ref
    assert gen.stats["accepted_tokens"] > 0


def test_early_exit_on_a_one_layer_model_says_why(draft, target):
    assert len(draft.model.layers) == 1
    with pytest.raises(ValueError, match=r"needs a target with at least 2 layers .* this model has 1 layer ") as error:
        EarlyExitDrafter(draft, 1)
    assert "[1, 0]" not in str(error.value)  # an empty range would read as a typo
    with pytest.raises(ValueError, match=r"\[1, 1\]"):  # the 2-layer target keeps the usual message
        EarlyExitDrafter(target, 2)


@pytest.mark.parametrize("train", [True, False])
def test_building_the_draft_leaves_the_targets_modes_alone(train):
    """The truncated model's modules are the target's own: building it used to call .eval() on them, switching the
    target's embedding, first layers, norm and head to eval while its other layers stayed in train mode."""
    from tests.helpers import tiny_llama

    model = tiny_llama(3, layers=3).train(train)
    drafter = EarlyExitDrafter(model, 1)
    assert {name: m.training for name, m in model.named_modules()} == {name: train for name, _ in
                                                                        model.named_modules()}
    own = {name: m.training for name, m in drafter.model.named_modules() if name in ("", "model", "model.layers")}
    assert own == {"": False, "model": False, "model.layers": False}  # the shell's own modules: eval
    assert drafter.model.model.layers[0].training is train  # a shared one: the target's mode
    model.eval()
    ref = autoregressive(model, [1, 2, 3, 4, 5], max_new_tokens=12).tokens
    assert generate(model, [1, 2, 3, 4, 5], drafter=EarlyExitDrafter(model, 2, 3), max_new_tokens=12).tokens == ref
