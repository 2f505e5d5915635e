"""A recommendation rendered as SGLang server flags (``python -m sglang.launch_server ...``).

The flags and algorithm names are those of SGLang 0.5.23 (PyPI wheel, October 2026): the ``Spec`` fields of
``sglang/srt/arg_groups/fields/spec.py`` become ``--speculative-*`` flags by ``_field_to_cli_name`` in
``sglang/srt/arg_groups/arg_utils.py`` (``--`` + the field name with ``-`` for ``_``), and
``--speculative-algorithm`` takes a ``SpeculativeAlgorithm`` member of ``sglang/srt/speculative/spec_info.py``
(EAGLE, EAGLE3, STANDALONE, NGRAM, ...; ``NEXTN`` is an alias of EAGLE), matched case-insensitively. The copies
this course validates against live in ``tests/data/engines/sglang-0.5.23/``.

Per method: ``draft_model`` -> STANDALONE (a separate draft model), ``eagle`` -> EAGLE3, ``ngram`` -> NGRAM,
``mtp`` -> NEXTN (the target's own MTP modules; a reserved alias of EAGLE, ``_RESERVED_ALIASES`` in
``sglang/srt/speculative/spec_registry.py``); SGLang has no Medusa, Lookahead, suffix-decoding or parallel (PARD)
drafter, so those get the nearest it has (a PARD draft: STANDALONE, run as an ordinary draft model; see
:meth:`SGLangSettings.sglang_notes`).
"""
from __future__ import annotations

import shlex

from lab.picker.gpus import check_gpus
from lab.picker.substitutes import PLACEHOLDERS, check_model_name, nearest_method

__all__ = ["SGLANG_ALGORITHMS", "SGLangSettings"]

SGLANG_ALGORITHMS = {"draft_model": "STANDALONE", "eagle": "EAGLE3", "ngram": "NGRAM", "mtp": "NEXTN"}
"""The course's methods SGLang runs natively -> the ``--speculative-algorithm`` value."""


class SGLangSettings:
    """SGLang renderings of a recommendation (a mixin: :class:`lab.picker.Recommendation` supplies ``method``,
    ``n_draft``, ``settings`` and ``workload``)."""

    def sglang_method(self) -> str:
        """The course method SGLang actually runs for this recommendation (``"none"`` without speculation):
        the method itself when SGLang has it, else the nearest (Lookahead and suffix decoding -> ``"ngram"``,
        Medusa -> :func:`lab.picker.substitutes.nearest_method`, a parallel (PARD) draft -> ``"draft_model"``)."""
        if self.method in ("none", *SGLANG_ALGORITHMS):
            return self.method
        if self.method == "parallel":
            return "draft_model"
        if self.method in ("lookahead", "suffix"):
            return "ngram"
        return nearest_method(bool(self.workload.get("has_small_same_family_model")))

    def sglang_args(self, draft_model: str | None = None) -> list:
        """The speculative-decoding flags for SGLang's server, as a list of argv strings (``[]`` for ``"none"``).

        ``draft_model``: path or hub name of the draft model / EAGLE-3 head (a placeholder when None). A chain of N
        drafts is ``--speculative-num-steps N --speculative-eagle-topk 1 --speculative-num-draft-tokens N+1``: SGLang
        counts the last verified token in ``--speculative-num-draft-tokens`` and, with top-k 1, forces it to
        ``num_steps + 1`` (``sglang/srt/arg_groups/speculative_hook.py``). NGRAM takes only
        ``--speculative-num-draft-tokens`` (the size of its draft tree, same count); it derives the rest. NEXTN (the
        target's MTP modules) takes the same chain flags and no draft path, as SGLang's docs run DeepSeek's MTP
        (``--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2``): the modules are
        read from the target's checkpoint, and ``draft_model`` is ignored.
        """
        method = self.sglang_method()
        if method == "none":
            return []
        n = self.n_draft
        args = ["--speculative-algorithm", SGLANG_ALGORITHMS[method]]
        if method == "ngram":
            return args + ["--speculative-num-draft-tokens", str(n + 1)]
        chain = ["--speculative-num-steps", str(n), "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                 str(n + 1)]
        if method == "mtp":
            return args + chain
        name = draft_model if draft_model is not None else PLACEHOLDERS[method]
        return args + ["--speculative-draft-model-path", name] + chain

    def sglang_command(self, target: str = "<target-model>", tensor_parallel_size: int = 1,
                       draft_model: str | None = None) -> str:
        """A ``python -m sglang.launch_server`` command line, shell-quoted: ``--model-path`` (``fields/model.py``),
        ``--tp-size`` when ``tensor_parallel_size`` > 1 (``fields/parallel.py``), then :meth:`sglang_args`.
        ``tensor_parallel_size`` must be an integer >= 1 (GPUs), else ``ValueError`` naming it."""
        tensor_parallel_size = check_gpus("tensor_parallel_size", tensor_parallel_size)
        target = check_model_name("target", target)
        parts = ["python", "-m", "sglang.launch_server", "--model-path", target]
        if tensor_parallel_size > 1:
            parts += ["--tp-size", str(tensor_parallel_size)]
        parts += self.sglang_args(draft_model)
        return " ".join(shlex.quote(p) for p in parts)

    def sglang_notes(self) -> list:
        """Where SGLang cannot serve the recommendation as given, one sentence each (``[]`` when it can)."""
        notes = []
        method = self.sglang_method()
        if self.method == "medusa":
            notes.append(f"SGLang 0.5.23 has no Medusa drafter (its algorithms: EAGLE, EAGLE3, NEXTN, STANDALONE, "
                         f"NGRAM, DFLASH, DSPARK, UNO); its flags above run "
                         f"{'a draft model (STANDALONE)' if method == 'draft_model' else 'NGRAM'} instead.")
        if self.method == "lookahead":
            notes.append("SGLang has no Lookahead decoding; its NGRAM drafter (a tree of continuations from an n-gram "
                         "trie of the tokens it has seen) is the nearest draft-free method.")
        if self.method == "suffix":
            notes.append("SGLang has no suffix-decoding drafter; its NGRAM drafter is the nearest: it also keeps a "
                         "trie over earlier tokens (capacity --speculative-ngram-capacity) and drafts a tree.")
        if method == "ngram" and self.method == "ngram":
            notes.append("SGLang's NGRAM drafts a tree from an n-gram trie (breadth up to "
                         "--speculative-ngram-max-bfs-breadth) rather than prompt lookup's single continuation.")
        if self.method == "parallel":
            notes.append("SGLang 0.5.23 has no PARD drafter (its algorithms: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, "
                         "DFLASH, DSPARK, UNO; DFLASH and DSPARK feed mask tokens too, but their drafts read the "
                         "target's hidden states); its flags run the PARD draft as a STANDALONE draft model, one "
                         "forward per drafted token.")
        if self.method == "mtp":
            notes.append("SGLang's NEXTN is a reserved alias of its EAGLE algorithm that drafts with the target's own "
                         "MTP (next-n) layers; if your model's MTP weights are published as a separate checkpoint, "
                         "pass it with --speculative-draft-model-path.")
        if "num_speculative_tokens_per_batch_size" in self.settings:
            notes.append("SGLang has no per-batch-size draft length: stop speculating yourself past the batch size "
                         "where the schedule above reaches N = 0.")
        return notes
