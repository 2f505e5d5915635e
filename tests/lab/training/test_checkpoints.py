"""lab.training.checkpoints: models are saved as float16 safetensors and read back from safetensors only."""
import pytest
import torch

from lab.training.checkpoints import load_checkpoint, save_model
from tests.helpers import tiny_llama


def test_saved_in_float16_and_read_back_in_float32(tmp_path):
    model = tiny_llama(0, layers=1, hidden=16).cpu()
    save_model(model, None, tmp_path / "m")
    assert (tmp_path / "m" / "model.safetensors").is_file()
    assert next(model.parameters()).dtype == torch.float32  # the caller's model stays in float32
    loaded = load_checkpoint(tmp_path / "m")
    assert next(loaded.parameters()).dtype == torch.float32
    want = model.lm_head.weight.half().float()
    assert torch.equal(loaded.lm_head.weight, want)


def test_a_pickled_checkpoint_is_never_read(tmp_path):
    """A folder with only ``pytorch_model.bin`` (a pickle: loading it may run code) raises instead of loading, though
    transformers' from_pretrained would read it by default."""
    model = tiny_llama(0, layers=1, hidden=16).cpu()
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(OSError, match="model.safetensors"):
        load_checkpoint(tmp_path)
