"""A recommendation rendered as SGLang server flags (``python -m sglang.launch_server ...``).

The flags and algorithm names are those of SGLang 0.5.23 (PyPI wheel, October 2026): the ``Spec`` fields of
``sglang/srt/arg_groups/fields/spec.py`` become ``--speculative-*`` flags by ``_field_to_cli_name`` in
``sglang/srt/arg_groups/arg_utils.py`` (``--`` + the field name with ``-`` for ``_``), and
``--speculative-algorithm`` takes a ``SpeculativeAlgorithm`` member of ``sglang/srt/speculative/spec_info.py``
(EAGLE, EAGLE3, STANDALONE, NGRAM, ...; ``NEXTN`` is an alias of EAGLE), matched case-insensitively. The copies
this course validates against live in ``tests/data/engines/sglang-0.5.23/``, among them
``sglang/srt/arg_groups/speculative_hook.py`` (``_handle_eagle_family``, ``_handle_ngram``: a speculating server
without ``--max-running-requests`` is capped at 48 running requests; ``--speculative-use-rejection-sampling`` is
refused for anything but EAGLE, EAGLE3 and NEXTN, and needs top-k 1; ``_auto_choose_speculative_params``: the draft
shape SGLang picks when none is given). One behaviour comes from a file of the same wheel that is not pinned:
``sglang/srt/speculative/eagle_worker_v2.py`` (rejection sampling refused for a head whose draft vocabulary is
smaller than the target's). ``--max-running-requests`` is the ``max_running_requests`` field of
``sglang/srt/arg_groups/fields/schedule.py``.

Per method: ``draft_model`` -> STANDALONE (a separate draft model), ``eagle`` -> EAGLE3, ``ngram`` -> NGRAM,
``mtp`` -> NEXTN (the target's own MTP modules; a reserved alias of EAGLE, ``_RESERVED_ALIASES`` in
``sglang/srt/speculative/spec_registry.py``); SGLang has no Medusa, Lookahead, suffix-decoding or parallel (PARD)
drafter, so those get the nearest it has that the workload allows (a PARD draft: STANDALONE, run as an ordinary
draft model; see :meth:`SGLangSettings.sglang_notes`), or no flags when every substitute is ruled out.
"""
from __future__ import annotations

import shlex

from lab.picker.gpus import MAX_RUNNING_REQUESTS, check_count, check_gpus
from lab.picker.substitutes import PLACEHOLDERS, check_model_name, fallback_note, nearest_method, no_substitute_note

__all__ = ["SGLANG_ALGORITHMS", "SGLangSettings"]

SGLANG_ALGORITHMS = {"draft_model": "STANDALONE", "eagle": "EAGLE3", "ngram": "NGRAM", "mtp": "NEXTN"}
"""The course's methods SGLang runs natively -> the ``--speculative-algorithm`` value."""

SGLANG_DEFAULT_RUNNING_REQUESTS = 48
"""What SGLang 0.5.23 sets ``max_running_requests`` to when it speculates and none is given ("Max running requests
is reset to 48 for speculative decoding", ``speculative_hook.py``: ``_handle_eagle_family`` for EAGLE, EAGLE3,
NEXTN and STANDALONE, ``_handle_ngram`` for NGRAM)."""


def last_drafting_batch(schedule) -> int:
    """The largest batch size at which a ``num_speculative_tokens_per_batch_size`` schedule ((first, last, N)
    triples) still drafts (N > 0): lesson 13's break-even batch minus one."""
    return max(int(last) for _first, last, n in schedule if n > 0)


class SGLangSettings:
    """SGLang renderings of a recommendation (a mixin: :class:`lab.picker.Recommendation` supplies ``method``,
    ``n_draft``, ``temperature``, ``settings`` and ``workload``)."""

    def sglang_method(self) -> str:
        """The course method SGLang actually runs for this recommendation (``"none"`` without speculation): the
        method itself when SGLang has it, else the nearest the workload allows
        (:func:`lab.picker.substitutes.nearest_method`: Lookahead and suffix decoding -> ``"ngram"``, Medusa -> a
        draft model or ``"ngram"``, a parallel (PARD) draft -> ``"draft_model"``), ``"none"`` when every
        substitute is ruled out."""
        return nearest_method(self.method, SGLANG_ALGORITHMS, self.workload)

    def sglang_max_running_requests(self, max_running_requests: int | None = None) -> int | None:
        """The ``--max-running-requests`` the flags set (None: leave it to SGLang). ``max_running_requests``, when
        given, is used as it is (an integer from 1 to :data:`lab.picker.gpus.MAX_RUNNING_REQUESTS`, else
        ``ValueError`` naming it). Otherwise, under load (a batch-size schedule in ``settings``), the last batch size
        the schedule drafts at (:func:`last_drafting_batch`, 262 for lesson 13's model): SGLang cannot stop drafting
        per batch size, and left unset it caps a speculating server at
        :data:`SGLANG_DEFAULT_RUNNING_REQUESTS` (48), far below the batches the schedule drafts for."""
        if max_running_requests is not None:
            return check_count("max_running_requests", max_running_requests, MAX_RUNNING_REQUESTS, "requests")
        schedule = self.settings.get("num_speculative_tokens_per_batch_size")
        return last_drafting_batch(schedule) if schedule else None

    def sglang_args(self, draft_model: str | None = None, max_running_requests: int | None = None) -> list:
        """The speculative-decoding flags for SGLang's server, as a list of argv strings (``[]`` for ``"none"``, and
        when every substitute is ruled out).

        ``draft_model``: path or hub name of the draft model / EAGLE-3 head (a placeholder when None; a name on one
        line, :func:`lab.picker.substitutes.check_model_name`). A chain of N drafts is ``--speculative-num-steps N
        --speculative-eagle-topk 1 --speculative-num-draft-tokens N+1``: SGLang counts the last verified token in
        ``--speculative-num-draft-tokens`` and, with top-k 1, forces it to ``num_steps + 1``
        (``sglang/srt/arg_groups/speculative_hook.py``). NGRAM takes only ``--speculative-num-draft-tokens`` (the
        size of its draft tree, same count); it derives the rest. NEXTN (the target's MTP modules) takes the same
        chain flags and no draft path, as SGLang's docs run DeepSeek's MTP (``--speculative-num-steps 1
        --speculative-eagle-topk 1 --speculative-num-draft-tokens 2``): the modules are read from the target's
        checkpoint, and ``draft_model`` is ignored. When sampling (T > 0), NEXTN adds
        ``--speculative-use-rejection-sampling`` (off by default, ``fields/spec.py``): without it SGLang drafts the
        argmax and verifies it as one-hot, accepting a drafted token with the target's probability of it, which is
        lower than rejection sampling against the draft's own distribution. EAGLE3 does not get it (a head with a
        reduced draft vocabulary, as most EAGLE-3 heads have, is then refused) and STANDALONE cannot (SGLang
        refuses it): :meth:`sglang_notes` says so. ``--max-running-requests``: :meth:`sglang_max_running_requests`.
        """
        method = self.sglang_method()
        if method == "none":
            if max_running_requests is not None:  # checked all the same: a bad value is a mistake in any workload
                check_count("max_running_requests", max_running_requests, MAX_RUNNING_REQUESTS, "requests")
            return []
        n = self.n_draft
        args = ["--speculative-algorithm", SGLANG_ALGORITHMS[method]]
        if method == "ngram":
            args += ["--speculative-num-draft-tokens", str(n + 1)]
        else:
            if method != "mtp":
                name = check_model_name("draft_model", draft_model) if draft_model is not None else \
                    PLACEHOLDERS[method]
                args += ["--speculative-draft-model-path", name]
            args += ["--speculative-num-steps", str(n), "--speculative-eagle-topk", "1",
                     "--speculative-num-draft-tokens", str(n + 1)]
            if method == "mtp" and self.temperature > 0:
                args.append("--speculative-use-rejection-sampling")
        running = self.sglang_max_running_requests(max_running_requests)
        if running is not None:
            args += ["--max-running-requests", str(running)]
        return args

    def sglang_command(self, target: str = "<target-model>", tensor_parallel_size: int = 1,
                       draft_model: str | None = None, max_running_requests: int | None = None) -> str:
        """A ``python -m sglang.launch_server`` command line, shell-quoted: ``--model-path`` (``fields/model.py``),
        ``--tp-size`` when ``tensor_parallel_size`` > 1 (``fields/parallel.py``), then :meth:`sglang_args`.
        ``tensor_parallel_size`` must be an integer from 1 to :data:`lab.picker.gpus.MAX_TENSOR_PARALLEL_SIZE`
        (GPUs), else ``ValueError`` naming it."""
        tensor_parallel_size = check_gpus("tensor_parallel_size", tensor_parallel_size)
        target = check_model_name("target", target)
        parts = ["python", "-m", "sglang.launch_server", "--model-path", target]
        if tensor_parallel_size > 1:
            parts += ["--tp-size", str(tensor_parallel_size)]
        parts += self.sglang_args(draft_model, max_running_requests)
        return " ".join(shlex.quote(p) for p in parts)

    def sglang_notes(self) -> list:
        """Where SGLang cannot serve the recommendation as given, one sentence each (``[]`` when it can)."""
        notes = []
        method = self.sglang_method()
        if method == "none" and self.method != "none":
            notes.append(no_substitute_note("SGLang 0.5.23", self.method, self.workload))
        elif self.method == "parallel" and method != "draft_model":
            notes.append(fallback_note("SGLang 0.5.23", self.method, method, self.workload))
        elif self.method == "medusa":
            notes.append(f"SGLang 0.5.23 has no Medusa drafter (its algorithms: EAGLE, EAGLE3, NEXTN, STANDALONE, "
                         f"NGRAM, DFLASH, DSPARK, UNO); its flags above run "
                         f"{'a draft model (STANDALONE)' if method == 'draft_model' else 'NGRAM'} instead.")
        elif self.method == "lookahead":
            notes.append("SGLang has no Lookahead decoding; its NGRAM drafter (a tree of continuations from an n-gram "
                         "trie of the tokens it has seen) is the nearest draft-free method.")
        elif self.method == "suffix":
            notes.append("SGLang has no suffix-decoding drafter; its NGRAM drafter is the nearest: it also keeps a "
                         "trie over earlier tokens (capacity --speculative-ngram-capacity) and drafts a tree.")
        elif self.method == "parallel":
            notes.append("SGLang 0.5.23 has no PARD drafter (its algorithms: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, "
                         "DFLASH, DSPARK, UNO; DFLASH and DSPARK feed mask tokens too, but their drafts read the "
                         "target's hidden states); its flags run the PARD draft as a STANDALONE draft model, one "
                         "forward per drafted token.")
        if method == "eagle" and self.workload.get("latency_bound", True):  # under load a short chain is the point
            notes.append(f"These flags draft a chain of {self.n_draft} (top-k 1), the shape the draft length above was "
                         "chosen for. Given no --speculative-num-steps, SGLang 0.5.23 picks the shape from the "
                         "target's architecture (_auto_choose_speculative_params in speculative_hook.py): a tree of 5 "
                         "steps, top-k 4 and 8 verified tokens for LlamaForCausalLM and Grok-1 targets, a chain of 3 "
                         "for the others. A tree accepts more per step where verifying 8 tokens costs no more than 4 "
                         "(a GPU at small batch; lesson 12 compares the shapes); set all three flags, as SGLang "
                         "requires"
                         + (", and keep top-k 1 when sampling: --speculative-use-rejection-sampling requires it."
                            if self.temperature > 0 else "."))
        if method == "ngram" and self.method == "ngram":
            notes.append("SGLang's NGRAM drafts a tree from an n-gram trie (breadth up to "
                         "--speculative-ngram-max-bfs-breadth) rather than prompt lookup's single continuation.")
        if self.method == "mtp":
            notes.append("SGLang's NEXTN is a reserved alias of its EAGLE algorithm that drafts with the target's own "
                         "MTP (next-n) layers; if your model's MTP weights are published as a separate checkpoint, "
                         "pass it with --speculative-draft-model-path.")
        if self.temperature > 0 and method in ("eagle", "draft_model"):
            notes.append("When sampling, SGLang verifies an EAGLE3 or STANDALONE draft as one-hot by default (it "
                         "drafts the argmax and accepts it with the target's probability of it), which accepts less "
                         "than rejection sampling against the draft's distribution: expect lower acceptance than vLLM "
                         "with draft_sample_method \"probabilistic\". "
                         + ("--speculative-use-rejection-sampling is refused for STANDALONE (speculative_hook.py)."
                            if method == "draft_model" else
                            "Add --speculative-use-rejection-sampling only for a head whose draft vocabulary is the "
                            "target's: SGLang 0.5.23 refuses it for a reduced one (eagle_worker_v2.py), as most "
                            "EAGLE-3 heads have."))
        schedule = self.settings.get("num_speculative_tokens_per_batch_size")
        if schedule and method != "none":
            notes.append(f"SGLang has no per-batch-size draft length, and left unset it caps a speculating server at "
                         f"{SGLANG_DEFAULT_RUNNING_REQUESTS} running requests (speculative_hook.py); the flags set "
                         f"--max-running-requests {last_drafting_batch(schedule)} (unless you give another), the "
                         "last batch size where the "
                         "schedule above still drafts, so SGLang never speculates past it: for more concurrent "
                         "requests, serve them from a replica without speculation.")
        return notes
