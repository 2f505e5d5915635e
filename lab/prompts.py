"""Prompt sets per task kind (layer 4): held-out prose, copy-heavy, edit and structured-record prompts, all built from
the bundled pair's held-out passages, and the checks that a prompt set fits a pair.

Lesson 08 (prompt lookup) and lesson 12 (the drafter arena) run their drafters on these; :mod:`lab.bench` times
held-out and copy-heavy prompts, :mod:`lab.arena` one task per kind (:data:`ARENA_TASKS`, :func:`arena_prompts`).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from lab.assets import PAIR_DIR, SMOLLM2_DIR
from lab.validation import check_int, check_token_ids

__all__ = ["held_out_prompts", "copy_heavy_prompts", "edit_prompts", "record_prompts", "arena_prompts", "EDITS",
           "FALLBACK_EDITS", "ARENA_TASKS", "CHAT_TASKS", "CONVERSATION_TASKS", "chat_prompts", "pair_tasks",
           "arena_tasks", "check_prompts", "encode_prompts", "context_problem", "transcripts", "conversation_requests",
           "assistant_turns"]

ARENA_TASKS = ("prose", "copy_edit", "structured", "copy")
"""The task kinds :func:`arena_prompts` builds prompts for."""


CHAT_TASKS = ("chat", "code", "structured", "copy_edit")
"""The task kinds of the real pair's held-out requests (:func:`chat_prompts`)."""


CONVERSATION_TASKS = ("multi_turn", "agent")
"""The conversation task kinds of the real pair (:func:`conversation_requests`): requests that quote the target's
earlier answers in the same conversation, the workload suffix decoding was built for."""


def transcripts() -> dict:
    """The committed multi-turn and agent-loop transcripts of the real pair (``lab/assets/smollm2-135m/
    transcripts.json``, built by :mod:`lab.training.transcripts`; the target's own greedy float32 answers):
    ``{"transcripts": [{"kind", "name", "messages", "answer_tokens"}], "provenance": {...}}``."""
    return json.loads((SMOLLM2_DIR / "transcripts.json").read_text(encoding="utf-8"))


def conversation_requests(task: str) -> list[list[dict]]:
    """The requests of one conversation kind (:data:`CONVERSATION_TASKS`: ``"multi_turn"`` edits of a function, a
    paragraph or a JSON record; ``"agent"`` loops of similar tool calls), as chat messages to encode with
    :meth:`lab.models.ModelPair.encode_chat`: each transcript cut just after its 2nd, 3rd, ... user turn, so every
    request quotes at least one earlier assistant answer of its conversation. Ordered turn by turn (every
    conversation's 2nd turn, then every 3rd, ...), so the first few requests come from different conversations.
    Raises ``ValueError`` for another ``task``."""
    if task not in CONVERSATION_TASKS:
        raise ValueError(f"task must be one of {CONVERSATION_TASKS}, got {task!r}")
    cuts = []
    for transcript in transcripts()["transcripts"]:
        if transcript["kind"] != task:
            continue
        messages = transcript["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        cuts.append([messages[: i + 1] for i in users[1:]])
    return [conversation[turn] for turn in range(max(map(len, cuts))) for conversation in cuts
            if turn < len(conversation)]


def _check_pair(pair, where: str) -> None:
    """``TypeError`` unless ``pair`` looks like a model pair (``encode`` and ``has_chat_template``, what these helpers
    read; duck-typed so a test's stand-in passes): a preset's name, "smollm2-135m", raised an AttributeError about
    ``has_chat_template`` that did not say what to pass."""
    if isinstance(pair, (str, bytes)) or not (hasattr(pair, "encode") and hasattr(pair, "has_chat_template")):
        shown = f" {pair!r}" if isinstance(pair, str) else ""
        raise TypeError(f"{where} takes a model pair as pair (lab.models.load_pair(...)), got "
                        f"{type(pair).__name__}{shown}" + (f": pass load_pair({pair!r})" if shown else ""))


def _end_of_turn(pair) -> int | None:
    """The token the pair's chat template closes an assistant message with: the first token it puts after the
    message's content (``<|im_end|>`` for ``"smollm2-135m"``). Falls back to ``pair.eos_token_id`` when the template
    puts nothing there or will not render a conversation that ends with an assistant message."""
    mark = "\x00answer\x00"
    try:
        text = pair.tokenizer.apply_chat_template([{"role": "user", "content": "x"},
                                                   {"role": "assistant", "content": mark}], tokenize=False)
    except Exception:  # a template may refuse such a conversation (jinja's raise_exception)
        return pair.eos_token_id
    after = pair.encode(text.split(mark, 1)[1]) if text.count(mark) == 1 else []
    return after[0] if after else pair.eos_token_id


def assistant_turns(pair, prompt_ids) -> list[list[int]]:
    """The assistant answers an encoded chat prompt (``prompt_ids``, from
    :meth:`lab.models.ModelPair.encode_chat`) quotes, as token lists each ending with the end-of-turn token, in
    order: what an engine that generated them holds in its suffix cache. The open assistant turn at the end (the one
    to generate) is not one. [] for a pair without a chat template.

    The end-of-turn token is the one the chat template puts right after an assistant message's content
    (``<|im_end|>``, which is also ``pair.eos_token_id``, for ``"smollm2-135m"``), read from the template rather
    than assumed to be the tokenizer's eos: a tokenizer whose eos is another token (``<|endoftext|>``) still finds
    its answers. [] as well when that token never closes a turn of an encoded prompt (nothing marks where an answer
    starts), so the suffix drafter then simply has no quoted answers to cache. Raises ``TypeError`` for a ``pair``
    that is not a model pair and for ``prompt_ids`` that are not token ids (a float is not truncated), ``ValueError``
    for a negative id (:func:`lab.validation.check_token_ids`)."""
    _check_pair(pair, "assistant_turns")
    ids = check_token_ids("prompt_ids", prompt_ids, allow_empty=True)
    if not pair.has_chat_template:
        return []
    eot = _end_of_turn(pair)
    probe = pair.encode_chat("x")
    if eot is None or eot not in probe:
        return []
    header = probe[len(probe) - probe[::-1].index(eot):]  # what follows an end of turn up to the answer's start
    found = []
    for start in range(len(ids) - len(header) + 1):
        if ids[start:start + len(header)] == header:
            begin = start + len(header)
            if eot in ids[begin:]:
                found.append(ids[begin: ids.index(eot, begin) + 1])
    return found


def chat_prompts(task: str) -> list[str]:
    """The held-out requests of one kind for the real pair (``"smollm2-135m"``), as user messages to encode with
    :meth:`lab.models.ModelPair.encode_chat`: eight per kind of :data:`CHAT_TASKS`, written for the course on topics
    and code the drafts' training prompts never use (:mod:`lab.training.chat_prompts`). Raises ``ValueError`` for
    another ``task``."""
    if task not in CHAT_TASKS:
        raise ValueError(f"task must be one of {CHAT_TASKS}, got {task!r}")
    return json.loads((SMOLLM2_DIR / "prompts.json").read_text(encoding="utf-8"))[task]


def held_out_prompts() -> list[str]:
    """Passages from the bundled pair's held-out split (never trained on), for demos, lessons and the bench."""
    return json.loads((PAIR_DIR / "prompts.json").read_text(encoding="utf-8"))


def check_prompts(prompts, name: str = "prompts") -> list[str]:
    """``prompts`` as a list after checking it is a non-empty sequence of strings (a bare string is a mistake:
    iterating it would run every character as a prompt); errors name ``name``.

    Raises ``TypeError`` for a string, a dict or set, a non-iterable or an item that is not a string, ``ValueError``
    for an empty sequence."""
    if isinstance(prompts, (str, bytes)):
        raise TypeError(f"{name} must be a list of strings, got one {type(prompts).__name__}: wrap it in a list, "
                        f"[{prompts[:40]!r}]")
    if isinstance(prompts, (Mapping, AbstractSet)):  # iterating gives its keys, or prompts in no order
        raise TypeError(f"{name} must be a list of strings, got a {type(prompts).__name__}: pass a list "
                        "(list(d.values()) for a dict of named prompts)")
    try:
        prompts = list(prompts)
    except TypeError:
        raise TypeError(f"{name} must be a list of strings, got {type(prompts).__name__}") from None
    if not prompts:
        raise ValueError(f"{name} must be a non-empty list of strings, got an empty one")
    wrong = next((i for i, p in enumerate(prompts) if not isinstance(p, str)), None)
    if wrong is not None:
        raise TypeError(f"{name} must be a list of strings, got an item of type {type(prompts[wrong]).__name__}: "
                        f"{name}[{wrong}] is {prompts[wrong]!r:.40}")
    return prompts


def context_problem(pair, encoded, max_new_tokens: int) -> str | None:
    """Why the longest of the ``encoded`` prompts (lists of token ids) plus ``max_new_tokens`` does not fit the
    target's context (a message for the caller to name its argument or flag in), or None if they fit. Raises
    ``TypeError`` for a ``pair`` that is not a model pair, ``ValueError`` for no prompts or a ``max_new_tokens``
    that is not an integer >= 0."""
    from lab.models import context_limit

    _check_pair(pair, "context_problem")
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 0)
    encoded = list(encoded)
    if not encoded:
        raise ValueError("encoded must hold at least one encoded prompt")
    limit = context_limit(pair.target)
    longest = max(len(ids) for ids in encoded)
    if limit is not None and longest + max_new_tokens > limit:
        which = "prompt" if len(encoded) == 1 else "the longest prompt"
        return (f"{which} ({longest} tokens) + {max_new_tokens} new tokens exceed the target's context of {limit} "
                f"positions: at most {limit - longest} with {'this prompt' if len(encoded) == 1 else 'these prompts'}")
    return None


def encode_prompts(pair, prompts) -> list[list[int]]:
    """Every prompt of ``prompts`` (strings, or for a chat pair also lists of ``{"role", "content"}`` messages)
    encoded for ``pair``: a string as one user turn of a chat (:meth:`lab.models.ModelPair.encode_chat`) when the
    pair has a chat template, so that an instruction-tuned target answers it, else as plain text; a message list as
    that conversation, ending with the assistant's prefix. ``ValueError`` naming the index of a prompt with no
    tokens; ``TypeError`` when ``prompts`` is one string (it was read as one prompt per character) or one
    ``{"role", "content"}`` message, or is not a list or other iterable of prompts, and when ``pair`` is not a model
    pair."""
    _check_pair(pair, "encode_prompts")
    if isinstance(prompts, (str, bytes)):
        raise TypeError(f"prompts must be a list of prompts, got one {type(prompts).__name__} "
                        f"{prompts[:60]!r}{'…' if len(prompts) > 60 else ''}: wrap it in a list, [prompt]")
    if isinstance(prompts, Mapping) or not isinstance(prompts, Iterable):
        raise TypeError(f"prompts must be a list of prompts (strings, or lists of {{'role', 'content'}} messages), "
                        f"got {type(prompts).__name__}" + (": wrap one message list in a list, [messages]"
                                                           if isinstance(prompts, Mapping) else ""))
    prompts = list(prompts)  # a generator too: an empty prompt is named by its index below
    encode = pair.encode_chat if pair.has_chat_template else pair.encode
    encoded = [encode(p) for p in prompts]
    empty = [i for i, ids in enumerate(encoded) if not ids]
    if empty:
        raise ValueError(f"prompts[{empty[0]}] is {prompts[empty[0]]!r}, which has no tokens; every prompt needs "
                         "at least one")
    return encoded


def _passage(pair, text: str, max_tokens: int = 48) -> str:
    """The first ``max_tokens`` tokens of ``text``, cut back to a whole line when one fits (as text)."""
    head = pair.decode(pair.encode(text)[:max_tokens])
    return head[: head.rindex("\n") + 1] if "\n" in head[:-1] else head


def copy_heavy_prompts(pair, texts=None, repeats: int = 3, lead_tokens: int = 4) -> list[str]:
    """Prompts whose continuation is a copy: a passage shown ``repeats`` times, then its first ``lead_tokens``.

    ``texts`` default to the held-out prompts; each passage is their first ≤ 48 tokens cut to whole lines, the
    format the target saw in its copy training (see the model card). Greedy decoding continues the passage, so
    prompt lookup can propose long runs that the target accepts (lesson 08).

    Raises ``ValueError`` naming the argument for ``repeats`` that is not an integer in [1, 100] (10**6 repeats
    built 892 MB of text) or ``lead_tokens`` not an integer >= 0, or an empty ``texts``; ``TypeError`` when
    ``texts`` is not a list of strings (e.g. one string) or ``pair`` is not a model pair."""
    _check_pair(pair, "copy_heavy_prompts")
    repeats, lead_tokens = check_int("repeats", repeats, 1, 100), check_int("lead_tokens", lead_tokens, 0)
    prompts = []
    for text in check_prompts(texts, "texts") if texts is not None else held_out_prompts():
        passage = _passage(pair, text)
        lead = pair.decode(pair.encode(passage)[:lead_tokens])
        prompts.append((passage + "\n\n") * repeats + lead)
    return prompts


EDITS = (("my lords", "my lieges"), ("my lord", "my liege"), (" you", " thee"), (" your", " thy"), (" the ", " this "),
         ("sir", "madam"), (" and ", " & "))
"""The word changes of :func:`edit_prompts`, (old, new), in order, each applied once, at its first occurrence as
whole words: ``" you"`` changes "you" but not "your" or "young", ``"sir"`` not the "sir" of "desire". The plural
"my lords" has its own entry, since "my lord" no longer matches inside it."""


FALLBACK_EDITS = (("good", "noble"), ("and", "&"), ("of", "o'"))
"""Word changes for a passage that none of ``EDITS`` changes (three of the eight held-out passages), tried in order
until one applies, so that every edit task holds an edit."""


def _edit(text: str, old: str, new: str) -> str:
    """``text`` with the first whole-word occurrence of ``old`` replaced by ``new`` (``text`` unchanged when there is
    none): where ``old`` starts or ends with a word character, the text next to it must not be one (``\\b``)."""
    start = r"\b" if re.match(r"\w", old[:1]) else ""
    end = r"\b" if re.match(r"\w", old[-1:]) else ""
    return re.sub(start + re.escape(old) + end, lambda _: new, text, count=1)


def edit_prompts(pair, texts=None) -> list[str]:
    """Edit tasks: a passage, then the same passage with small whole-word changes (``EDITS``; where none applies, the
    first of ``FALLBACK_EDITS`` that does), then the edited version once more from its start — the output should
    repeat the edited text, which the prompt already holds.

    Raises ``TypeError`` when ``texts`` is not a list of strings (e.g. one string) or ``pair`` is not a model pair,
    ``ValueError`` when ``texts`` is empty."""
    _check_pair(pair, "edit_prompts")
    prompts = []
    for text in check_prompts(texts, "texts") if texts is not None else held_out_prompts():
        passage = _passage(pair, text)
        edited = passage
        for old, new in EDITS:
            edited = _edit(edited, old, new)
        for old, new in FALLBACK_EDITS if edited == passage else ():
            edited = _edit(passage, old, new)
            if edited != passage:
                break
        lead = pair.decode(pair.encode(edited)[:4])
        prompts.append(passage + "\n\n" + edited + "\n\n" + edited + "\n\n" + lead)
    return prompts


def record_prompts(pair, texts=None, records: int = 4) -> list[str]:
    """Structured records, one JSON-like line per speech: ``{"speaker": "KING", "words": 5, "line": "…"}``.

    Built from the held-out passages (speaker lines in capitals followed by a speech); each prompt holds up to
    ``records`` records and the opening of the next one, so the continuation is more of the same structure.
    ``pair`` is not used (the records need no tokenizer): ``record_prompts(None)`` counts them before a pair loads.

    Raises ``ValueError`` for ``records`` that is not an integer >= 2 (a prompt shows at least two records before
    the one to continue) or an empty ``texts``, ``TypeError`` when
    ``texts`` is not a list of strings (e.g. one string)."""
    records = check_int("records", records, 2)
    texts = check_prompts(texts, "texts") if texts is not None else held_out_prompts()
    speeches = []
    for text in texts:
        lines = [line.strip() for line in text.split("\n")]
        for i, line in enumerate(lines[:-1]):
            if line and line.rstrip(".").isupper() and lines[i + 1] and not lines[i + 1].rstrip(".").isupper():
                speech = lines[i + 1]
                speeches.append({"speaker": line.rstrip("."), "words": len(speech.split()), "line": speech})
    prompts = []
    for start in range(0, max(1, len(speeches) - records), records):
        chunk = speeches[start:start + records + 1]
        if len(chunk) < 3:
            break
        body = "".join(json.dumps(record) + "\n" for record in chunk[:-1])
        prompts.append(body + '{"speaker": "' + chunk[-1]["speaker"] + '", "words": ')
    return prompts


def pair_tasks(pair) -> tuple[str, ...]:
    """The task kinds with prompts for ``pair``: :data:`CHAT_TASKS` for a chat pair (one with a chat template, such
    as ``"smollm2-135m"``), else :data:`ARENA_TASKS` (plain-text prompts from the Shakespeare pair's held-out
    passages). Raises ``TypeError`` when ``pair`` is not a model pair (a preset's name: load it first)."""
    _check_pair(pair, "pair_tasks")
    return CHAT_TASKS if pair.has_chat_template else ARENA_TASKS


def arena_tasks(pair) -> tuple[str, ...]:
    """Every task kind :func:`arena_prompts` has for ``pair``: :func:`pair_tasks`, plus :data:`CONVERSATION_TASKS`
    for the real pair (``"smollm2-135m"``, whose transcripts are committed). The lessons loop over
    :func:`pair_tasks` (one-turn requests); the arena runs these."""
    return pair_tasks(pair) + (CONVERSATION_TASKS if pair.has_chat_template and pair.name == "smollm2-135m" else ())


def arena_prompts(pair, task: str) -> list:
    """The prompts of one arena task. For a chat pair (:func:`pair_tasks`): the held-out requests of
    :func:`chat_prompts` (strings, one user turn each), and for the real pair also the conversation requests of
    :func:`conversation_requests` (lists of chat messages); :func:`encode_prompts` encodes both. Otherwise "prose"
    = :func:`held_out_prompts` (8), "copy_edit" = :func:`edit_prompts` (8: rewrite a passage with small word
    changes), "structured" = :func:`record_prompts` (JSON-like records), "copy" = :func:`copy_heavy_prompts` (8: a
    passage repeated three times). Raises ``ValueError`` naming ``task`` for a name not in :func:`arena_tasks`
    (``TypeError`` for one that is not a str), ``TypeError`` when ``pair`` is not a model pair."""
    _check_pair(pair, "arena_prompts")
    if not isinstance(task, str):  # a list raised "unhashable type" on the plain-text pair
        raise TypeError(f"task must be one task name (a str, one of {arena_tasks(pair)}), got {type(task).__name__}")
    if pair.has_chat_template:
        allowed = arena_tasks(pair)
        if task not in allowed:
            raise ValueError(f"task must be one of {allowed} for the chat pair {pair.name!r}, got {task!r}")
        return conversation_requests(task) if task in CONVERSATION_TASKS else chat_prompts(task)
    makers = {"prose": lambda: held_out_prompts(), "copy_edit": lambda: edit_prompts(pair),
              "structured": lambda: record_prompts(pair), "copy": lambda: copy_heavy_prompts(pair)}
    if task not in makers:
        raise ValueError(f"task must be one of {ARENA_TASKS}, got {task!r}")
    return makers[task]()
