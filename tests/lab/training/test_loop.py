"""lab.training.loop: training picks its precision from the CPU (bf16 autocast only where bf16 is native: an
AVX2-only CPU emulates it, and a target training step there took 20x longer than in float32), and train_model's
evaluations and early stop."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lab.training import loop


def _tiny_model(hidden=32):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def _batches():
    return loop.Batches(torch.randint(0, 64, (4096,)), seq_len=16, copy_frac=0.0, gen=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("native", [False, True])
def test_training_step_runs_in_the_chosen_precision(monkeypatch, native):
    monkeypatch.setattr(loop, "bf16_autocast", lambda: native)
    model = _tiny_model()
    seen = []
    model.model.layers[0].mlp.down_proj.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    history = loop.train_model(model, _batches(), steps=2, batch=2, lr=1e-3, warmup=1, desc="tiny")
    assert seen == [torch.bfloat16 if native else torch.float32] * 2
    assert len(history) == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in history)


@pytest.mark.parametrize("native", [False, True])
def test_distillation_teacher_runs_in_the_same_precision(monkeypatch, native):
    monkeypatch.setattr(loop, "bf16_autocast", lambda: native)
    student, teacher = _tiny_model(), _tiny_model().eval()
    seen = []
    teacher.model.layers[0].mlp.down_proj.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    loop.train_model(student, _batches(), steps=1, batch=2, lr=1e-3, warmup=1, desc="tiny", teacher=teacher)
    assert seen == [torch.bfloat16 if native else torch.float32]


@pytest.mark.parametrize("flags, onednn_says, native", [
    ({"avx2", "avx512f", "avx512bw"}, True, False),  # AVX-512 without BF16: oneDNN says yes, bf16 is only emulated
    ({"avx2", "avx512f", "avx512_bf16"}, False, True),  # native bf16, whatever oneDNN's own check says
    ({"avx2"}, False, False)])
def test_training_and_load_pair_auto_decide_bf16_by_the_same_rule(monkeypatch, flags, onednn_says, native):
    """bf16_autocast asked oneDNN (_is_mkldnn_bf16_supported, True on AVX-512 CPUs that emulate bf16) while
    auto_dtype reads the CPU's bf16 flags: the same CPU trained in bf16 and loaded pairs in float32."""
    from lab import models

    monkeypatch.setattr(models, "_cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn_says, raising=False)
    assert loop.bf16_autocast() is native
    assert models.auto_dtype("cpu") == (torch.bfloat16 if native else torch.float32)
    model = _tiny_model()
    seen = []
    model.model.layers[0].mlp.down_proj.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    with loop.cpu_autocast():
        model(torch.zeros(1, 4, dtype=torch.long))
    assert seen == [torch.bfloat16 if native else torch.float32]
    monkeypatch.setattr(models, "_cpu_native_bf16", lambda: False)  # the one helper decides both
    assert loop.bf16_autocast() is False and models.auto_dtype("cpu") == torch.float32


def test_cards_name_the_precision():
    assert loop.precision_label({"bf16_autocast": False}).startswith("float32")
    assert loop.precision_label({"bf16_autocast": True}) == "bf16 autocast"
    assert loop.precision_label({}) == "bf16 autocast"   # runs recorded before the check all used autocast


def test_train_model_stops_when_told_and_records_dict_measures():
    model = _tiny_model(hidden=16)
    batches = loop.Batches(torch.randint(0, 64, (2_000,)), 16, 0.0, torch.Generator().manual_seed(0))
    calls = []

    def evaluate(m):
        calls.append(1)
        return {"probe": 0.1 * len(calls)}

    history = loop.train_model(model, batches, 50, 2, 1e-3, 2, "t", evaluate=evaluate, eval_every=5,
                               stop=lambda entry: entry["probe"] >= 0.3)
    assert [h["step"] for h in history if "probe" in h] == [0, 5, 10]  # stopped after the third evaluation
    assert history[-1]["probe"] == pytest.approx(0.3)


def test_learning_rate_warms_up_then_decays_to_a_tenth():
    rates = [loop.lr_at(step, 100, 1.0, 10) for step in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert rates[10] == pytest.approx(1.0) and all(a >= b for a, b in zip(rates[10:], rates[11:]))
    assert rates[-1] == pytest.approx(0.1, abs=1e-3)


def test_take_batch_sees_every_index_once_per_pass_and_refills_with_a_new_shuffle():
    from lab.training.loop import take_batch

    order, seen = [], []
    for step in range(5):  # 5 batches of 4 over 10 indices: two whole passes
        batch, order = take_batch(order, 4, 10, seed=step)
        assert len(batch) == 4
        seen += batch
    assert sorted(seen[:10]) == list(range(10)) and sorted(seen[10:20]) == list(range(10))
    assert take_batch([7, 8, 9], 2, 10, seed=0) == ([7, 8], [9])  # enough left: no refill
    assert take_batch([7], 2, 10, seed=3)[0][0] == 7                # the rest of a pass comes first
