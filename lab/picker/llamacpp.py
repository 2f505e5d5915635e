"""A recommendation rendered as ``llama-server`` flags (llama.cpp).

The flags are those of llama.cpp's argument table, ``common/arg.cpp`` (the ``add_opt(common_arg({...}))`` calls),
and the ``--spec-type`` names those of ``common/speculative.cpp``, both as vendored in llama-cpp-python 0.3.36
(PyPI sdist, ``vendor/llama.cpp``); the copies this course validates against live in
``tests/data/engines/llama.cpp-from-llama-cpp-python-0.3.36/``. That table renamed the draft flags: ``--draft-max``
/ ``--draft-min`` now stop the server with "the argument has been removed", and the draft model is
``--spec-draft-model`` (``-md``); the usage follows llama.cpp's ``docs/speculative.md`` of the same tree.

Per method: ``draft_model`` -> ``--spec-type draft-simple``, ``eagle`` -> ``draft-eagle3`` (an EAGLE-3 head
converted to GGUF), ``ngram`` -> ``ngram-simple`` (the last matching n-gram's continuation), ``suffix`` ->
``ngram-mod`` (a hash pool shared by all server slots), ``mtp`` -> ``draft-mtp`` (the MTP layers of the target's own
GGUF); ``lookahead`` -> ``ngram-simple``, ``parallel`` -> ``draft-simple`` (no PARD type: the PARD draft runs as an
ordinary draft model) and ``medusa`` -> the nearest method the workload allows (see
:meth:`LlamaCppSettings.llamacpp_notes`), or no flags when every substitute is ruled out. Drafter weights must be
GGUF files.
"""
from __future__ import annotations

import shlex

from lab.picker.substitutes import PLACEHOLDERS, check_model_name, fallback_note, nearest_method, no_substitute_note
from lab.picker.tables import NGRAM_LOOKUP

__all__ = ["LLAMACPP_SPEC_TYPES", "LlamaCppSettings"]

LLAMACPP_SPEC_TYPES = {"draft_model": "draft-simple", "eagle": "draft-eagle3", "ngram": "ngram-simple",
                       "suffix": "ngram-mod", "mtp": "draft-mtp"}
"""The course's methods llama.cpp runs (suffix decoding: its nearest, ngram-mod) -> ``--spec-type``."""

NGRAM_MOD_MATCH = 16
"""``--spec-ngram-mod-n-match`` for suffix decoding's ngram-mod: how many trailing tokens must recur before it drafts.
Its default (24, ``common/common.h`` of the same vendored tree, pinned beside it) waits for a long exact
match, where suffix decoding drafts from a match of any length; 16 is the shortest ``speculative.cpp`` takes without
its warning ("ngram_mod n_match=%d is too small - poor quality is possible", ``common_speculative_impl_ngram_mod``),
since the pool hashes the n-gram and shorter ones collide."""


class LlamaCppSettings:
    """llama.cpp renderings of a recommendation (a mixin: :class:`lab.picker.Recommendation` supplies ``method``,
    ``n_draft``, ``settings`` and ``workload``)."""

    def llamacpp_method(self) -> str:
        """The course method llama.cpp runs (``"none"`` without speculation): the method itself when it has it
        (suffix decoding: ``"suffix"`` rendered as ngram-mod), else the nearest the workload allows
        (:func:`lab.picker.substitutes.nearest_method`: Lookahead -> ``"ngram"``, Medusa -> a draft model or
        ``"ngram"``, a parallel (PARD) draft -> ``"draft_model"``), ``"none"`` when every substitute is ruled
        out."""
        return nearest_method(self.method, LLAMACPP_SPEC_TYPES, self.workload)

    def llamacpp_args(self, draft_model: str | None = None) -> list:
        """The speculative-decoding flags for ``llama-server``, as a list of argv strings (``[]`` for ``"none"``).

        Draft model / EAGLE-3: ``--spec-type``, ``--spec-draft-model`` (``draft_model``, a GGUF path; a placeholder
        when None) and ``--spec-draft-n-max`` N. Prompt lookup: ``--spec-type ngram-simple``,
        ``--spec-ngram-simple-size-n`` (the n-gram looked up, :data:`lab.picker.tables.NGRAM_LOOKUP`'s maximum)
        and ``--spec-ngram-simple-size-m`` N (the m-gram drafted after it, which ``speculative.cpp`` passes as
        ngram-simple's draft limit). Suffix decoding's nearest: ``--spec-type ngram-mod`` with
        ``--spec-ngram-mod-n-min 1``, ``--spec-ngram-mod-n-max`` N (its defaults, 48 and 64, are long drafts
        for MoE models) and ``--spec-ngram-mod-n-match`` :data:`NGRAM_MOD_MATCH`. MTP: ``--spec-type draft-mtp``
        and ``--spec-draft-n-max`` N (its driver reads the draft
        limits, ``common_speculative_impl_draft_mtp`` in ``speculative.cpp``); no draft model, the MTP layers come
        with the target.
        """
        method = self.llamacpp_method()
        if method == "none":
            return []
        n = str(self.n_draft)
        args = ["--spec-type", LLAMACPP_SPEC_TYPES[method]]
        if method == "mtp":
            return args + ["--spec-draft-n-max", n]
        if method in ("draft_model", "eagle"):
            name = check_model_name("draft_model", draft_model) if draft_model is not None else PLACEHOLDERS[method]
            return args + ["--spec-draft-model", name, "--spec-draft-n-max", n]
        if method == "ngram":
            return args + ["--spec-ngram-simple-size-n", str(NGRAM_LOOKUP["prompt_lookup_max"]),
                           "--spec-ngram-simple-size-m", n]
        return args + ["--spec-ngram-mod-n-min", "1", "--spec-ngram-mod-n-max", n, "--spec-ngram-mod-n-match",
                       str(NGRAM_MOD_MATCH)]

    def llamacpp_command(self, target: str = "<target-model.gguf>", draft_model: str | None = None) -> str:
        """A ``llama-server -m TARGET ...`` command line, shell-quoted (``target``: the target's GGUF file)."""
        target = check_model_name("target", target)
        parts = ["llama-server", "-m", target] + self.llamacpp_args(draft_model)
        return " ".join(shlex.quote(p) for p in parts)

    def llamacpp_notes(self) -> list:
        """Where llama.cpp cannot serve the recommendation as given, one sentence each."""
        notes = []
        method = self.llamacpp_method()
        if method == "none" and self.method != "none":
            notes.append(no_substitute_note("llama.cpp", self.method, self.workload))
        elif self.method == "parallel" and method != "draft_model":
            notes.append(fallback_note("llama.cpp", self.method, method, self.workload))
        elif self.method == "medusa":
            notes.append(f"llama.cpp has no Medusa drafter (--spec-type offers draft-simple, draft-eagle3, draft-mtp, "
                         f"draft-dflash, draft-dspark and n-gram types); its flags run "
                         f"{LLAMACPP_SPEC_TYPES[method]} instead.")
        elif self.method == "parallel":
            notes.append("llama.cpp has no PARD drafter (its --spec-type values: draft-simple, draft-eagle3, "
                         "draft-mtp, draft-dflash, draft-dspark and n-gram types; draft-dflash feeds mask tokens too "
                         "but asserts a draft with target_layer_ids, common/speculative.cpp); its flags run the PARD "
                         "draft, converted to GGUF, as draft-simple, one forward per drafted token.")
        elif self.method == "lookahead":
            notes.append("llama.cpp has no Lookahead decoding; ngram-simple (the continuation of the last matching "
                         "n-gram) is the nearest draft-free type.")
        if self.method == "suffix":
            notes.append("llama.cpp has no suffix-tree drafter; ngram-mod is the nearest: one n-gram hash pool shared "
                         "by all server slots, drafting one chain of variable length rather than a tree, and only "
                         f"once the last {NGRAM_MOD_MATCH} tokens recur (--spec-ngram-mod-n-match; its default is "
                         "24, and below 16 llama.cpp warns of poor drafts), where suffix decoding drafts from a "
                         "shorter match too.")
        if "num_speculative_tokens_per_batch_size" in self.settings and method != "none":
            notes.append("llama.cpp has no per-batch-size draft length: with many parallel slots, measure whether "
                         "speculation still pays.")
        return notes
