"""The real pair's parallel draft (PARD on the projected draft model): its batches score the right rows against the
right teacher, its position-1 agreement is the draft's ordinary one, and what it saves loads as a ParallelDrafter
that proposes what the trained model computes."""
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

import lab.training.chat_parallel as module
from lab.assets import ModelNotAvailableError
from lab.decode import generate
from lab.drafters.parallel import BLOCK_KEY, MASK_KEY, TARGET_VOCAB_KEY, ParallelDrafter
from lab.models import ModelPair, load_projected_draft
from lab.training.chat_draft import ChatDraftRecipe, ProjectedDraft, draft_config, greedy_agreement
from lab.training.chat_parallel import (ChatParallelRecipe, MaskedProjectedDraft, chat_parallel_agreement,
                                        parallel_batch)
from tests.helpers import kill_after_first_checkpoint, tiny_llama

QUIET = lambda *_: None  # noqa: E731


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


@pytest.mark.parametrize("bad, message", [({"block_size": 0}, "recipe.block_size"),
                                          ({"keep": 1.5}, r"recipe.keep must be in \[0, 1\]"),
                                          ({"held_out_share": 1.0}, r"recipe.held_out_share must be in \[0, 1\)")])
def test_bad_recipes_are_named_before_any_work(bad, message, monkeypatch):
    monkeypatch.setattr(module, "load_chat_data", lambda folder: pytest.fail("work started before the checks"))
    with pytest.raises(ValueError, match=message):
        module.train_chat_parallel(SimpleNamespace(name="x"), replace(ChatParallelRecipe(), **bad), log=QUIET)


@pytest.fixture
def tiny_chat(tmp_path, monkeypatch):
    """A tiny random Llama target (64 ids, id 2 ends an answer), a projected draft of it saved where the recipe starts
    from, and sixteen made-up chat sequences whose teacher is a fixed distribution over 8 ids; the cache in tmp."""
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    target = tiny_llama(11, layers=1, hidden=24)
    config = draft_config(target.config, ChatDraftRecipe(hidden=16, layers=1, heads=2, intermediate=24))
    torch.manual_seed(1)
    draft = ProjectedDraft(config, target.get_input_embeddings().weight)
    save_file({k: v.contiguous() for k, v in draft.state_to_save().items()}, str(tmp_path / "model.safetensors"))
    config.save_pretrained(tmp_path)
    real_start = module.start_from_draft
    monkeypatch.setattr(module, "start_from_draft", lambda pair, folder=tmp_path: real_start(pair, folder))
    gen = torch.Generator().manual_seed(0)
    sequences = []
    for i in range(16):
        prompt, answer = 5 + i % 4, 8 + i % 5
        ids = torch.randint(3, 64, (prompt + answer,), generator=gen)
        top = torch.stack([torch.cat([ids[prompt + j:prompt + j + 1], torch.arange(3, 10)]) for j in range(answer)])
        sequences.append({"ids": ids, "answer_start": prompt, "kind": ("chat", "code")[i % 2], "topk_ids": top,
                          "topk_logprobs": torch.log(torch.tensor([0.65] + [0.05] * 7)).expand(answer, 8)})
    monkeypatch.setattr(module, "load_chat_data", lambda folder: list(sequences))
    pair = ModelPair("tiny-chat", target, None, SimpleNamespace(eos_token_id=2), torch.device("cpu"), torch.float32)
    return pair, sequences


def test_a_short_run_learns_saves_a_drafter_that_drafts_exactly_and_a_killed_run_resumes(tiny_chat, tmp_path,
                                                                                        monkeypatch):
    pair, sequences = tiny_chat
    recipe = ChatParallelRecipe(block_size=3, steps=30, batch=4, lr=1e-2, warmup=2, held_out_share=0.25,
                                checkpoint_every=10)
    out = module.train_chat_parallel(pair, recipe, out_dir=tmp_path / "straight", log=QUIET)
    info = json.loads((out / "training.json").read_text())
    assert info["data"] == {"sequences": 16, "train_sequences": 8, "held_out_sequences": 8}
    first, last = info["history"][0], info["history"][-1]
    assert (first["step"], last["step"]) == (0, 29) and last["loss"] < 0.8 * first["loss"], (first, last)
    assert list(info["held_out_agreement"]) == ["position_1", "position_2", "position_3"]
    config = json.loads((out / "config.json").read_text())
    assert (config["vocab_size"], config[MASK_KEY], config[TARGET_VOCAB_KEY], config[BLOCK_KEY]) == (65, 64, 64, 3)
    assert not (tmp_path / "cache" / "chat-data" / "tiny-chat" / "parallel-checkpoint").exists()

    drafter = ParallelDrafter.from_pretrained(pair, n_draft=3, directory=out)
    assert drafter.model.get_input_embeddings().weight.shape == (65, 16)
    for prompt in ([5, 9, 13, 17], sequences[0]["ids"][:7].tolist()):
        want = generate(pair.target, prompt, max_new_tokens=12).tokens
        assert generate(pair.target, prompt, drafter=drafter, max_new_tokens=12).tokens == want

    kill_after_first_checkpoint(monkeypatch, module, lambda: module.train_chat_parallel(  # at its first checkpoint
        pair, recipe, out_dir=tmp_path / "resumed", log=QUIET))
    said = []
    resumed = module.train_chat_parallel(pair, recipe, out_dir=tmp_path / "resumed", log=said.append)
    assert any("resuming at step 10" in line for line in said)
    a, b = (load_file(str(folder / "model.safetensors")) for folder in (out, resumed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
