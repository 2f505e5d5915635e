"""``python -m lab arena`` (lab.cli.arena): option errors before any run, the drafters a hub pair lacks, and the
help."""
from __future__ import annotations

import pytest

from lab import cli


def test_arena_with_a_hub_pair_skips_the_drafters_it_lacks(hub_pair, monkeypatch, capsys):
    import lab.arena

    seen = {}
    real = lab.arena.run_arena

    def spy(pair, **kwargs):
        seen.update(kwargs)
        kwargs["tasks"] = ("prose",)  # one task keeps this short
        return real(pair, **kwargs, progress=False)

    monkeypatch.setattr(lab.arena, "run_arena", spy)
    assert cli.main(["arena", "--pair", "gpt2", "--prompts", "1", "--max-new-tokens", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert seen["drafters"] == ("model", "ngram", "lookahead")
    assert "not run with pair gpt2: medusa (" in captured.err


def test_arena_help_describes_the_options_with_their_defaults(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["arena", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrap argparse's line breaks
    assert "The drafter arena (lesson 12)" in text
    for part in ("--json print the arena and the adaptive comparison as JSON",
                 "--max-new-tokens MAX_NEW_TOKENS tokens to generate per prompt, >= 1 (default: 64)",
                 "--n-draft N_DRAFT draft tokens per step N for the drafters that take one, >= 1 (default: 4)",
                 "--pair PAIR model pair preset, one of shakespeare, smollm2-135m, gpt2, smollm2, qwen2.5 (default: "
                 "shakespeare; shakespeare and smollm2-135m work offline)",
                 "--prompts PROMPTS prompts per task, 1 to 4 with the bundled pair (default: 3)",
                 "--repeats REPEATS time each run this often and keep the fastest, >= 1 (default: 1)"):
        assert part in text, part
