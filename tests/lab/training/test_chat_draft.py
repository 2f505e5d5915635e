"""The real pair's draft model: its loss, its batches, its agreement measure, and that what it trains is what loads."""
import pytest
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from lab.assets import ModelNotAvailableError
from lab.models import load_projected_draft
from lab.training.chat_draft import (ChatDraftRecipe, ProjectedDraft, _batch, draft_config, greedy_agreement,
                                     soft_cross_entropy)


def test_soft_cross_entropy_of_fixed_logits():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25, 0.0 + 1e-30]]))
    top_ids = torch.tensor([[0, 1]])
    top_logprobs = torch.log(torch.tensor([[0.6, 0.2]]))  # renormalised to 0.75 / 0.25
    expected = -(0.75 * torch.log(torch.tensor(0.5)) + 0.25 * torch.log(torch.tensor(0.25)))
    torch.testing.assert_close(soft_cross_entropy(logits, top_ids, top_logprobs), expected)


def _sequence(ids, start, kind="chat"):
    answer = len(ids) - start
    top = torch.tensor([[ids[start + j], 0] for j in range(answer)])
    return {"ids": torch.tensor(ids), "answer_start": start, "topk_ids": top,
            "topk_logprobs": torch.log(torch.tensor([[0.9, 0.1]] * answer)), "kind": kind}


def test_batches_score_exactly_the_answer_positions():
    seqs = [_sequence([5, 6, 7, 8, 9], 3), _sequence([5, 6, 7], 1, "code")]
    inputs, rows, cols, top_ids, _ = _batch(seqs, max_len=16, pad_id=2)
    assert inputs.tolist() == [[5, 6, 7, 8], [5, 6, 2, 2]]
    # input position i predicts token i + 1: answer tokens 8, 9 from positions 2, 3; tokens 6, 7 from 0, 1
    assert list(zip(rows.tolist(), cols.tolist())) == [(0, 2), (0, 3), (1, 0), (1, 1)]
    assert top_ids[:, 0].tolist() == [8, 9, 6, 7]


def test_batches_cut_long_sequences_from_the_front():
    seqs = [_sequence(list(range(10, 20)), 4)]
    inputs, rows, cols, top_ids, _ = _batch(seqs, max_len=4, pad_id=2)
    assert inputs.tolist() == [[15, 16, 17, 18]]
    assert cols.tolist() == [0, 1, 2, 3] and top_ids[:, 0].tolist() == [16, 17, 18, 19]


def test_greedy_agreement_counts_top_one_matches_per_kind():
    seqs = [_sequence([5, 6, 7, 8, 9], 3), _sequence([5, 6, 7], 1, "code")]

    def always_eight(inputs):  # predicts token 8 everywhere
        out = torch.zeros(*inputs.shape, 32)
        out[..., 8] = 1
        return out

    assert greedy_agreement(always_eight, seqs, 16, 2) == {"chat": 0.5, "code": 0.0, "all": 0.25}


@pytest.fixture
def tiny_target():
    config = LlamaConfig(vocab_size=64, hidden_size=24, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def test_the_loaded_draft_computes_what_was_trained(tiny_target, tmp_path):
    recipe = ChatDraftRecipe(hidden=16, layers=1, heads=2, intermediate=24)
    config = draft_config(tiny_target.config, recipe)
    torch.manual_seed(1)
    trained = ProjectedDraft(config, tiny_target.get_input_embeddings().weight).eval()
    save_file({k: v.contiguous() for k, v in trained.state_to_save().items()}, str(tmp_path / "model.safetensors"))
    config.save_pretrained(tmp_path)
    loaded = load_projected_draft(tmp_path, tiny_target)
    assert type(loaded) is LlamaForCausalLM and loaded.config.hidden_size == 16
    assert loaded.get_output_embeddings().weight.data_ptr() == loaded.get_input_embeddings().weight.data_ptr()
    ids = torch.tensor([[1, 5, 9, 33, 2]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, trained(ids), atol=1e-5, rtol=1e-5)


def test_a_draft_without_its_projection_is_a_clear_error(tiny_target, tmp_path):
    recipe = ChatDraftRecipe(hidden=16, layers=1, heads=2, intermediate=24)
    config = draft_config(tiny_target.config, recipe)
    state = ProjectedDraft(config, tiny_target.get_input_embeddings().weight).state_to_save()
    config.save_pretrained(tmp_path)
    save_file({k: v.contiguous() for k, v in state.items() if k != "embed_projection"},
              str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelNotAvailableError, match="embed_projection"):
        load_projected_draft(tmp_path, tiny_target)
    save_file({k: v.contiguous() for k, v in state.items() if "layers.0.mlp" not in k},
              str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelNotAvailableError, match="does not match"):
        load_projected_draft(tmp_path, tiny_target)
    with pytest.raises(ModelNotAvailableError, match="no draft model in .*missing.*train chat-draft"):
        load_projected_draft(tmp_path / "missing", tiny_target)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelNotAvailableError, match="cannot be read"):
        load_projected_draft(tmp_path, tiny_target)


def test_held_out_agreement_is_the_drafts_teacher_forced_match(smollm2_pair):
    import dataclasses

    from lab.training.chat_draft import held_out_agreement

    pair = smollm2_pair
    value = held_out_agreement(pair, ["Name a fruit."], max_new_tokens=6)
    assert 0.0 <= value <= 1.0
    # the target as its own draft agrees everywhere: the measure compares with the target's own greedy choices
    assert held_out_agreement(dataclasses.replace(pair, draft=pair.target), ["Name a fruit."], 6) == 1.0
    with pytest.raises(ValueError, match="no draft model"):
        held_out_agreement(dataclasses.replace(pair, draft=None), ["Name a fruit."])
    with pytest.raises(ValueError, match="at least one request"):
        held_out_agreement(pair, [])


def test_a_bf16_target_gets_the_embedding_product_of_the_float32_weights(tiny_target, tmp_path):
    recipe = ChatDraftRecipe(hidden=16, layers=1, heads=2, intermediate=24)
    config = draft_config(tiny_target.config, recipe)
    trained = ProjectedDraft(config, tiny_target.get_input_embeddings().weight)
    save_file({k: v.contiguous() for k, v in trained.state_to_save().items()}, str(tmp_path / "model.safetensors"))
    config.save_pretrained(tmp_path)
    full = tiny_target.get_input_embeddings().weight.detach().clone()
    bf16_target = LlamaForCausalLM(tiny_target.config).to(torch.bfloat16)
    bf16_target.load_state_dict(tiny_target.state_dict())
    loaded = load_projected_draft(tmp_path, bf16_target, full)
    assert loaded.dtype is torch.bfloat16
    expected = (full @ trained.projection.detach()).to(torch.bfloat16)
    torch.testing.assert_close(loaded.get_input_embeddings().weight, expected, atol=0, rtol=0)
    with pytest.raises(ValueError, match="embedding must have the target's embedding shape"):
        load_projected_draft(tmp_path, bf16_target, full[:10])
