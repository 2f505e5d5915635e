"""The real pair's parallel draft (PARD on the projected draft model): its batches score the right rows against the
right teacher, its position-1 agreement is the draft's ordinary one, and what it saves loads as a ParallelDrafter
that proposes what the trained model computes."""
import json

import pytest
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from lab.assets import ModelNotAvailableError
from lab.drafters.parallel import BLOCK_KEY, MASK_KEY, TARGET_VOCAB_KEY, ParallelDrafter
from lab.models import load_projected_draft
from lab.training.chat_draft import ChatDraftRecipe, draft_config, greedy_agreement
from lab.training.chat_parallel import (ChatParallelRecipe, MaskedProjectedDraft, chat_parallel_agreement,
                                        parallel_batch)


def _sequence(ids, start, kind="chat"):
    """A chat-data sequence whose top-1 teacher token is the true next token."""
    answer = len(ids) - start
    top = torch.tensor([[ids[start + j], 0] for j in range(answer)])
    return {"ids": torch.tensor(ids), "answer_start": start, "topk_ids": top,
            "topk_logprobs": torch.log(torch.tensor([[0.9, 0.1]] * answer)), "kind": kind}


def test_a_batch_scores_every_copy_where_the_next_token_is_an_answer_token():
    seqs = [_sequence([5, 6, 7, 8, 9], 3), _sequence([5, 6, 7], 1, "code")]
    batch = parallel_batch(seqs, max_len=16, pad_id=2, layout_args=(2, 1.0, 0.0), mask_id=99)
    # the inputs are [5, 6, 7, 8] and [5, 6, pad, pad]; copy 1 (the masks) sits at positions 1..3
    assert batch["ids"].tolist() == [[5, 6, 7, 8, 99, 99, 99], [5, 6, 2, 2, 99, 99, 99]]
    assert batch["position_ids"][0].tolist() == [0, 1, 2, 3, 1, 2, 3]
    scored = list(zip(batch["rows"].tolist(), batch["position_ids"][0][batch["cols"]].tolist(),
                      batch["copy"].tolist(), batch["topk_ids"][:, 0].tolist()))
    # (sequence, position p, copy, the token p + 1 it learns): real rows and masks at every answer position
    assert scored == [(0, 2, 0, 8), (0, 3, 0, 9), (0, 2, 1, 8), (0, 3, 1, 9),
                      (1, 0, 0, 6), (1, 1, 0, 7), (1, 1, 1, 7)]
    allow = batch["attention_mask"][0, 0] == 0
    # the mask at position 3 (block anchored at the real token at 2) sees real tokens 0..2 and itself
    assert allow[6].tolist() == [True, True, True, False, False, False, True]


@pytest.fixture
def tiny():
    config = LlamaConfig(vocab_size=64, hidden_size=24, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    target = LlamaForCausalLM(config).eval()
    draft_cfg = draft_config(target.config, ChatDraftRecipe(hidden=16, layers=1, heads=2, intermediate=24))
    torch.manual_seed(1)
    model = MaskedProjectedDraft(draft_cfg, target.get_input_embeddings().weight).eval()
    with torch.no_grad():
        model.mask_row.normal_()
    return target, model


def test_position_one_agreement_is_the_drafts_ordinary_agreement(tiny):
    _, model = tiny
    torch.manual_seed(2)
    seqs = [_sequence(torch.randint(3, 64, (n,)).tolist(), start) for n, start in ((12, 5), (9, 2), (15, 10))]
    per_position = chat_parallel_agreement(model, seqs, 32, 2, block_size=3)
    assert len(per_position) == 3
    assert per_position[0] == greedy_agreement(lambda x: model(x), seqs, 32, 2)["all"]


def test_the_saved_draft_loads_as_a_parallel_drafter_that_proposes_what_was_trained(tiny, tmp_path):
    target, model = tiny
    save_file({k: v.contiguous() for k, v in model.state_to_save().items()}, str(tmp_path / "model.safetensors"))
    config = model.body.config
    config.vocab_size = 65
    for key, value in ((MASK_KEY, 64), (TARGET_VOCAB_KEY, 64), (BLOCK_KEY, 3)):
        setattr(config, key, value)
    config.save_pretrained(tmp_path)
    loaded = load_projected_draft(tmp_path, target)
    assert loaded.get_input_embeddings().weight.shape == (65, 16)
    drafter = ParallelDrafter(loaded, n_draft=3)
    assert (drafter.mask_token_id, drafter.vocab_size, drafter.block_size) == (64, 64, 3)
    prompt = [1, 5, 9, 33, 7]
    drafter.reset(prompt)
    from lab.drafters.base import DraftRequest

    proposed = drafter.propose(DraftRequest(tokens=prompt, max_tokens=3, temperature=0.0)).tokens
    with torch.no_grad():
        expected = model(torch.tensor([prompt + [64, 64]]))[0, -3:].argmax(-1).tolist()
    assert proposed == expected
    # a mask row of the wrong width is named
    state = model.state_to_save()
    state["extra_embedding_rows"] = torch.zeros(1, 7)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelNotAvailableError, match=r"extra_embedding_rows of shape \(1, 7\), not \[n, 16\]"):
        load_projected_draft(tmp_path, target)


def test_bad_recipes_are_named(smollm2_pair):
    from lab.training.chat_parallel import train_chat_parallel

    with pytest.raises(ValueError, match="recipe.block_size"):
        train_chat_parallel(smollm2_pair, ChatParallelRecipe(block_size=0))
    with pytest.raises(ValueError, match=r"recipe.keep must be in \[0, 1\]"):
        train_chat_parallel(smollm2_pair, ChatParallelRecipe(keep=1.5))
    assert json.dumps(ChatParallelRecipe().__dict__)  # recorded in training.json as it is
