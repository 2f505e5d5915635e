"""lab.train picks its precision from the CPU: bf16 autocast only where bf16 is native (an AVX2-only CPU emulates it,
and a target training step there took 20x longer than in float32)."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lab import train


def _tiny_model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config)


@pytest.mark.parametrize("native", [False, True])
def test_training_step_runs_in_the_chosen_precision(monkeypatch, native):
    monkeypatch.setattr(train, "bf16_autocast", lambda: native)
    model = _tiny_model()
    seen = []
    model.model.layers[0].mlp.down_proj.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    batches = train.Batches(torch.randint(0, 64, (4096,)), seq_len=16, copy_frac=0.0,
                            gen=torch.Generator().manual_seed(0))
    history = train.train_model(model, batches, steps=2, batch=2, lr=1e-3, warmup=1, desc="tiny")
    assert seen == [torch.bfloat16 if native else torch.float32] * 2
    assert len(history) == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in history)


@pytest.mark.parametrize("native", [False, True])
def test_distillation_teacher_runs_in_the_same_precision(monkeypatch, native):
    monkeypatch.setattr(train, "bf16_autocast", lambda: native)
    student, teacher = _tiny_model(), _tiny_model().eval()
    seen = []
    teacher.model.layers[0].mlp.down_proj.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    batches = train.Batches(torch.randint(0, 64, (4096,)), seq_len=16, copy_frac=0.0,
                            gen=torch.Generator().manual_seed(0))
    train.train_model(student, batches, steps=1, batch=2, lr=1e-3, warmup=1, desc="tiny", teacher=teacher)
    assert seen == [torch.bfloat16 if native else torch.float32]


def test_cards_name_the_precision():
    assert train._precision({"bf16_autocast": False}).startswith("float32")
    assert train._precision({"bf16_autocast": True}) == "bf16 autocast"
    assert train._precision({}) == "bf16 autocast"   # runs recorded before the check all used autocast
