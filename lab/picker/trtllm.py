"""A recommendation rendered as TensorRT-LLM's ``speculative_config`` (the LLM API's options, as YAML).

The keys and ``decoding_type`` values are those of ``tensorrt_llm/llmapi/llm_args.py`` in NVIDIA/TensorRT-LLM at
commit 0004396720054fd8e205cbf616f21f0b57c6b412 (2026): ``DecodingBaseConfig`` (``max_draft_len``,
``speculative_model``, ``draft_len_schedule``, ...) and its subclasses in the ``SpeculativeConfig`` union, each
with a ``decoding_type`` literal (``Draft_Target``, ``Eagle3``, ``NGram``, ``SA``, ``MTP``, ...). At that commit
the union no longer holds ``MedusaDecodingConfig`` or ``LookaheadDecodingConfig`` (both were in it in earlier
versions of the file); the course's skeleton of the file is in ``tests/data/engines/tensorrt-llm-0004396/``.

Per method: ``draft_model`` -> Draft_Target, ``eagle`` -> Eagle3, ``ngram`` -> NGram (a per-request pool, as prompt
lookup), ``suffix`` -> SA (TensorRT-LLM's suffix automaton, longest match, pool shared across requests), ``mtp`` ->
MTP (``MTPDecodingConfig``: the target's own modules), ``parallel`` -> PARD (``PARDDecodingConfig``: a
parallel draft model with a mask token);
``lookahead`` -> NGram and ``medusa`` -> the nearest method the workload allows (see
:meth:`TrtllmSettings.trtllm_notes`), or no config when every substitute is ruled out.

When sampling (T > 0), Eagle3 and MTP, TensorRT-LLM's one-model paths, get ``use_rejection_sampling: true``: the
field (``DecodingBaseConfig`` in the full ``llm_args.py``, status "prototype") defaults to false, which verifies
non-greedy batches by exact match, and it acts on the one-model paths only ("The non-dynamic-tree one-model path
requires FlashInfer").
"""
from __future__ import annotations

import json

from lab.picker.substitutes import PLACEHOLDERS, nearest_method, no_substitute_note
from lab.picker.tables import NGRAM_LOOKUP

__all__ = ["TRTLLM_DECODING_TYPES", "TrtllmSettings", "yaml_text"]

TRTLLM_DECODING_TYPES = {"draft_model": "Draft_Target", "eagle": "Eagle3", "ngram": "NGram", "suffix": "SA",
                         "mtp": "MTP", "parallel": "PARD"}
"""The course's methods TensorRT-LLM runs natively (suffix decoding: its suffix automaton) -> ``decoding_type``."""

TRTLLM_ONE_MODEL = ("eagle", "mtp")
"""The course's methods TensorRT-LLM serves on its one-model paths (the draft layers run inside the target's engine),
the only ones its ``use_rejection_sampling`` acts on."""


class TrtllmSettings:
    """TensorRT-LLM renderings of a recommendation (a mixin: :class:`lab.picker.Recommendation` supplies
    ``method``, ``n_draft``, ``temperature``, ``settings`` and ``workload``)."""

    def trtllm_method(self) -> str:
        """The course method TensorRT-LLM runs (``"none"`` without speculation): the method itself when it has
        it, else the nearest the workload allows (:func:`lab.picker.substitutes.nearest_method`: Lookahead ->
        ``"ngram"``, Medusa -> a draft model or ``"ngram"``), ``"none"`` when every substitute is ruled out."""
        return nearest_method(self.method, TRTLLM_DECODING_TYPES, self.workload)

    def trtllm_config(self, draft_model: str | None = None) -> dict:
        """The ``speculative_config`` mapping for TensorRT-LLM's LLM API (``{}`` for ``"none"``).

        Always ``decoding_type`` and ``max_draft_len`` = N. Draft_Target, Eagle3 and PARD add ``speculative_model``
        (``draft_model``, or a placeholder when None). PARD leaves ``mask_token_id`` unset, so TensorRT-LLM reads it
        from the draft model's config ("typically vocab_size", the field's description in the full ``llm_args.py``;
        the pinned skeleton keeps only its annotation). NGram adds ``max_matching_ngram_size`` (the n-gram looked up,
        :data:`lab.picker.tables.NGRAM_LOOKUP`'s maximum) and ``is_public_pool: false`` (each request searches its
        own tokens, as prompt lookup does); SA adds ``max_matching_ngram_size: -1`` (longest match) and
        ``enable_global_pool: true`` (matches across requests, as suffix decoding's cache). MTP takes nothing more:
        its modules come from the target's checkpoint, and ``num_nextn_predict_layers`` is not the user's to set at
        the pinned commit (``Field(init=False)``), so N goes in ``max_draft_len`` alone. Under load the
        recommendation's batch-size schedule becomes ``draft_len_schedule`` ({largest batch size: N}; batch sizes
        past the last key draft nothing). When sampling (T > 0), Eagle3 and MTP add ``use_rejection_sampling: true``
        (:data:`TRTLLM_ONE_MODEL`; the module docstring).
        """
        method = self.trtllm_method()
        if method == "none":
            return {}
        config = {"decoding_type": TRTLLM_DECODING_TYPES[method], "max_draft_len": self.n_draft}
        if method in ("draft_model", "eagle", "parallel"):
            config["speculative_model"] = draft_model if draft_model is not None else PLACEHOLDERS[method]
        elif method == "ngram":
            config.update(max_matching_ngram_size=NGRAM_LOOKUP["prompt_lookup_max"], is_public_pool=False)
        elif method == "suffix":
            config.update(max_matching_ngram_size=-1, enable_global_pool=True)
        if method in TRTLLM_ONE_MODEL and self.temperature > 0:
            config["use_rejection_sampling"] = True
        schedule = self.settings.get("num_speculative_tokens_per_batch_size")
        if schedule:
            config["draft_len_schedule"] = draft_len_schedule(schedule)
        return config

    def trtllm_yaml(self, draft_model: str | None = None) -> str:
        """:meth:`trtllm_config` as the YAML options text (``speculative_config:`` and its keys; "" for
        ``"none"``), for ``trtllm-serve``'s or ``LLM(...)``'s extra options file."""
        config = self.trtllm_config(draft_model)
        return yaml_text({"speculative_config": config}) if config else ""

    def trtllm_notes(self) -> list:
        """Where TensorRT-LLM cannot serve the recommendation as given, one sentence each."""
        notes = []
        method = self.trtllm_method()
        if method == "none" and self.method != "none":
            notes.append(no_substitute_note("TensorRT-LLM", self.method, self.workload))
        elif self.method == "medusa":
            notes.append("TensorRT-LLM's LLM API at the pinned commit has no Medusa config (MedusaDecodingConfig is "
                         "not in its SpeculativeConfig union); the YAML runs "
                         f"{TRTLLM_DECODING_TYPES[method]} instead.")
        elif self.method == "lookahead":
            notes.append("TensorRT-LLM's LookaheadDecodingConfig is gone from the pinned LLM API; the YAML uses its "
                         "NGram drafter, the nearest draft-free method.")
        if self.method == "suffix":
            notes.append("TensorRT-LLM has no suffix-tree drafter; its SA (suffix automaton) drafter is the nearest: "
                         "longest-suffix matching over the request and, with enable_global_pool, other requests, "
                         "drafting one chain rather than a tree.")
        if method in TRTLLM_ONE_MODEL and self.temperature > 0:
            notes.append("TensorRT-LLM's use_rejection_sampling is a prototype field and its non-dynamic-tree "
                         "one-model path requires FlashInfer; without it, sampled batches are verified by exact "
                         "match, which accepts less.")
        elif method in ("draft_model", "parallel") and self.temperature > 0:
            notes.append("TensorRT-LLM's use_rejection_sampling acts on its one-model speculative paths only (its "
                         "description in llm_args.py), so the YAML sets it for Eagle3 and MTP and not for "
                         f"{TRTLLM_DECODING_TYPES[method]}: measure the acceptance at your temperature.")
        return notes


def draft_len_schedule(schedule) -> dict:
    """vLLM's ``num_speculative_tokens_per_batch_size`` ((first batch size, last batch size, N) triples) as
    TensorRT-LLM's ``draft_len_schedule`` ({last batch size: N}, N > 0 only: batch sizes past the last key draft
    nothing). Raises ``ValueError`` when a range with N > 0 follows one with N = 0 (TensorRT-LLM's schedule cannot
    switch drafting back on)."""
    out, stopped = {}, False
    for _first, last, n in sorted(schedule):
        if n == 0:
            stopped = True
        elif stopped:
            raise ValueError(f"schedule must not draft again after N = 0; got {schedule!r}")
        else:
            out[int(last)] = int(n)
    return out


def yaml_text(data: dict, indent: int = 0) -> str:
    """Nested mappings of str / int / float / bool / None as block YAML (strings JSON-quoted when YAML would read
    them otherwise). Enough for the options above without a YAML library at run time."""
    lines = []
    for key, value in data.items():
        pad = " " * indent
        if isinstance(value, dict):
            lines.append(f"{pad}{key}:")
            lines.append(yaml_text(value, indent + 2))
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return "\n".join(lines)


def _scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    plain = text and text.replace("_", "").replace("-", "").replace("/", "").replace(".", "").isalnum() \
        and not text[0].isdigit() and text.lower() not in ("true", "false", "null", "yes", "no", "on", "off", "~")
    return text if plain else json.dumps(text)
