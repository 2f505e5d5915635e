"""lab.picker.memory: the memory each method needs, from Llama 3 8B's parameter counts."""
import pytest

from lab import picker


def test_memory_arithmetic():
    gb = picker.MEMORY_NEEDED_GB
    assert gb["draft_model"] == 4.0  # 1B parameters × 2 bytes, doubled
    assert gb["eagle"] == pytest.approx(2 * 2 * picker.MEMORY_PARAMS["eagle"] / 1e9, abs=0.01)
    assert picker.MEMORY_PARAMS["eagle"] == 251_658_240  # one Llama 3 8B layer + the 2h → h projection
    assert gb["medusa"] == pytest.approx(2 * picker.MEMORY_PARAMS["medusa"] / 1e9, abs=0.01)
    assert gb["ngram"] == gb["lookahead"] == 0.0
