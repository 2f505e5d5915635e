"""Helpers shared by the command-line tests (import them as ``from tests.lab.cli.helpers import ...``)."""
from __future__ import annotations

import pytest

from lab import cli


def run_bad(argv, capsys) -> str:
    """Run the CLI with options argparse must reject; return its stderr (exit status 2 asserted)."""
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return captured.err


def error_line(stderr: str) -> str:
    """The one error line argparse prints after the usage."""
    lines = [line for line in stderr.splitlines() if ": error: " in line]
    assert len(lines) == 1, stderr
    return lines[0]


class CharPair:
    """A stand-in for a loaded pair: one token per character, a 512-position target, no weights."""
    name, device, eos_token_id, has_chat_template = "fake", "cpu", None, False

    def __init__(self):
        from types import SimpleNamespace

        self.target = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=512))

    def encode(self, text):
        return [ord(ch) for ch in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


def gpt2_stand_in(pair):
    """A stand-in for ``load_pair("gpt2")``: two tiny random GPT-2 models on ``pair``'s tokenizer, on the CPU."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from lab.models import ModelPair

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(pair.tokenizer), n_positions=1024, n_embd=32, n_layer=2, n_head=2)
    target, draft = GPT2LMHeadModel(config).eval(), GPT2LMHeadModel(config).eval()
    return ModelPair(name="gpt2", target=target, draft=draft, tokenizer=pair.tokenizer, device=torch.device("cpu"),
                     dtype=torch.float32)
