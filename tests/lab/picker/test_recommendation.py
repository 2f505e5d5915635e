"""lab.picker.recommendation: the Markdown decision guide has every part."""
from lab.picker import recommend


def test_markdown_guide_has_every_part():
    rec = recommend("code", 0.2, False, False)
    text = rec.to_markdown("Qwen/Qwen2.5-Coder-32B-Instruct", tensor_parallel_size=2)
    for part in ("# Speculative decoding for code generation at T = 0.2", "## Decision: n-gram prompt lookup",
                 "## Why", "## Serve it with vLLM", "--speculative-config", "--tensor-parallel-size 2",
                 "## Run it with transformers", "prompt_lookup_num_tokens=3", "1.5–2×",
                 "seed lesson 002", "## When to revisit", "vllm:spec_decode_num_drafts_total"):
        assert part in text, part
    assert "no `--speculative-config`" in recommend("chat", 1.5, True, True).to_markdown().lower()


def test_the_seed_rows_workload_keeps_its_acronym():
    """The reason names seed lesson 002's row as a phrase: "structured JSON", not "structured json" (an instructor's
    find)."""
    from lab.picker import recommend

    text = " ".join(recommend("structured", 0.0, False, False).reasons)
    assert "for structured JSON (k " in text and "structured json" not in text
