"""Engine settings: a recommendation rendered for vLLM (``--speculative-config``, ``vllm serve``), for transformers
(``generate`` arguments, the assistant's generation config, a runnable snippet) and for this course's own loop;
:class:`EngineSettings` also gathers the SGLang (:mod:`lab.picker.sglang`), TensorRT-LLM (:mod:`lab.picker.trtllm`)
and llama.cpp (:mod:`lab.picker.llamacpp`) renderings.

:class:`EngineSettings` holds these renderings as methods; :class:`lab.picker.Recommendation` inherits them, so
``rec.vllm_config()``, ``rec.sglang_args()``, ``rec.trtllm_yaml()``, ``rec.llamacpp_args()`` and ``rec.hf_kwargs()``
read the recommendation's ``method``, ``n_draft``, ``draft_temperature``, ``temperature``, ``settings`` and
``workload``.

The vLLM keys and ``method`` values are those of ``vllm/config/speculative.py`` (``SpeculativeConfig``) in the vLLM
0.34.0 release (PyPI wheel, November 2026; pinned in ``tests/data/engines/vllm-0.34.0/``, where the tests read
the real sets); the transformers keys are ``GenerationConfig`` fields of the installed transformers
(:data:`TRANSFORMERS_CHECKED`, 5.25.0).

Where an engine has no drafter for the recommended method it runs the nearest one it has that the workload allows
(:func:`lab.picker.substitutes.nearest_method`), or nothing when every substitute is ruled out; :func:`served_methods`
gathers what each engine runs, and the summary quotes each one's expected speedup.
"""
from __future__ import annotations

import json
import shlex

from lab.picker.gpus import check_gpus
from lab.picker.llamacpp import LLAMACPP_SPEC_TYPES, LlamaCppSettings
from lab.picker.sglang import SGLANG_ALGORITHMS, SGLangSettings
from lab.picker.substitutes import PLACEHOLDERS, check_model_name, fallback_note, nearest_method, no_substitute_note
from lab.picker.tables import LOOKAHEAD_SETTINGS, NGRAM_LOOKUP
from lab.picker.trtllm import TRTLLM_DECODING_TYPES, TrtllmSettings

__all__ = ["VLLM_SPECULATIVE_KEYS", "VLLM_METHODS", "VLLM_SUFFIX_DEFAULTS", "VLLM_NATIVE", "HF_NATIVE",
           "TRANSFORMERS_CHECKED", "ENGINE_LABELS", "PLACEHOLDERS", "EngineSettings", "served_methods"]

VLLM_SPECULATIVE_KEYS = frozenset({
    "enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size",
    "draft_decode_context_parallel_size", "quantization", "moe_backend", "attention_backend", "kv_cache_dtype",
    "max_model_len", "revision", "code_revision", "index_share_for_mtp_iteration", "disable_eagle_block_drop",
    "disable_lookahead_block_hashes", "draft_lm_head_quantization", "use_local_argmax_reduction",
    "prompt_lookup_max", "prompt_lookup_min", "parallel_drafting", "num_speculative_tokens_per_batch_size",
    "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests", "suffix_decoding_corpus_tokens",
    "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob", "rejection_sample_method",
    "synthetic_acceptance_rates", "synthetic_acceptance_length", "enable_adaptive_verification",
    "draft_sample_method", "dspark_draft_topk", "xpress_topc", "speculator_options", "fly_window_size",
    "fly_entropy_threshold", "fly_entropy_top_k",
})
"""User-settable fields of vLLM 0.34.0's ``SpeculativeConfig`` (``vllm/config/speculative.py``), i.e. the keys
``--speculative-config`` accepts, for display. Left out: ``tensor_parallel_size`` (kept by vLLM only to warn that
``draft_tensor_parallel_size`` was meant) and ``draft_load_config`` (vLLM fills it from the target's). The tests
check this set against the fields parsed from the pinned file."""

VLLM_METHODS = frozenset({"ngram", "draft_model", "suffix", "eagle", "eagle3", "extract_hidden_states", "mtp",
                          "dflash", "ngram_gpu", "dspark"})
"""``SpeculativeMethod`` values in the same file (the model-specific ``*_mtp`` names omitted; ``"mtp"`` covers
them). vLLM 0.34.0 has no ``"medusa"``, ``"mlp_speculator"`` or ``"custom_class"`` any more."""

VLLM_SUFFIX_DEFAULTS = {"suffix_decoding_max_tree_depth": 24, "suffix_decoding_max_cached_requests": 10000,
                        "suffix_decoding_corpus_tokens": 1 << 20}
"""The suffix-decoding keys vLLM 0.34.0 still reads, at its defaults (its ``suffix_decoding_max_spec_factor`` and
``suffix_decoding_min_token_prob`` are deprecated there and have no effect, so the config leaves them out)."""

VLLM_NATIVE = frozenset({"ngram", "draft_model", "eagle", "suffix", "mtp"})
"""The course's methods vLLM 0.34.0 runs itself (no Medusa proposer since 0.34.0, no Lookahead, and
``parallel_drafting`` serves DFlash and DSpark only); the rest get :func:`lab.picker.substitutes.nearest_method`."""

HF_NATIVE = frozenset({"draft_model", "ngram", "mtp"})
"""The course's methods transformers' ``generate`` runs itself: an assistant model, prompt lookup, ``use_mtp``."""

TRANSFORMERS_CHECKED = "5.25.0"
"""The transformers release whose ``generate`` defaults the transformers settings were checked against (the
installed one; tests/lab/picker/test_engines.py fails when another is installed, so that the citations move)."""

ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "llamacpp": "llama.cpp",
                 "transformers": "transformers"}
"""Engine key (:attr:`EngineSettings.ENGINES`) -> its name as printed."""

_NATIVE = {"vllm": VLLM_NATIVE, "sglang": frozenset(SGLANG_ALGORITHMS), "trtllm": frozenset(TRTLLM_DECODING_TYPES),
           "llamacpp": frozenset(LLAMACPP_SPEC_TYPES), "transformers": HF_NATIVE}


def served_methods(method: str, workload: dict) -> dict:
    """What each engine runs for a recommendation of ``method`` on ``workload``: engine key (in
    :attr:`EngineSettings.ENGINES` order) -> course method, ``"none"`` where every substitute is ruled out
    (:func:`lab.picker.substitutes.nearest_method`)."""
    return {engine: nearest_method(method, native, workload) for engine, native in _NATIVE.items()}


class EngineSettings(SGLangSettings, TrtllmSettings, LlamaCppSettings):
    """The engine renderings of a recommendation (a mixin: :class:`lab.picker.Recommendation` supplies
    ``method``, ``n_draft``, ``draft_temperature``, ``temperature``, ``settings`` and ``workload``)."""

    ENGINES = tuple(ENGINE_LABELS)
    """The engines rendered, in the order the summary prints them."""

    def served(self) -> dict:
        """What each engine runs for this recommendation: :func:`served_methods` of ``method`` on ``workload``."""
        return served_methods(self.method, self.workload)

    def engine_notes(self) -> list:
        """Every engine's notes: the recommendation's own ``notes`` (vLLM and transformers, from the rules), then
        vLLM's, transformers', SGLang's, TensorRT-LLM's and llama.cpp's, one sentence each (what each runs in place
        of a method it lacks, or that it serves the target alone when the workload rules every substitute out)."""
        return [*self.notes, *self.vllm_notes(), *self.hf_notes(), *self.sglang_notes(), *self.trtllm_notes(),
                *self.llamacpp_notes()]

    # --- vLLM ----------------------------------------------------------------------------------------------
    def vllm_config(self, draft_model: str | None = None, draft_tensor_parallel_size: int | None = None,
                    tensor_parallel_size: int = 1) -> dict:
        """The ``--speculative-config`` JSON object for vLLM (``{}`` for ``"none"``: serve without it).

        Args:
            draft_model: name or path of the draft model / EAGLE head / Medusa heads (a placeholder when None).
            draft_tensor_parallel_size: GPUs the draft is sharded over; added to the object for the model-based
                methods that take it (``draft_model``, ``eagle``, ``mtp``). vLLM 0.34.0 accepts only 1 or the target's
                ``tensor_parallel_size``, for every model-based method (``SpeculativeConfig._verify_and_get_draft_tp``
                in ``vllm/config/speculative.py``; earlier releases' draft-model proposer required the target's
                size). None leaves it to vLLM (the target's size).
            tensor_parallel_size: GPUs the target is sharded over (``--tensor-parallel-size``, default 1), used
                only to check ``draft_tensor_parallel_size``.

        Lookahead has no vLLM proposer; its config is the n-gram one, the nearest draft-free method vLLM ships (the
        recommendation's ``notes`` say so). vLLM 0.34.0 has no Medusa proposer: Medusa gets the nearest method
        (:meth:`vllm_method`, :meth:`vllm_notes`). A substitute the workload rules out is not rendered: with none
        left the object is ``{}``, as for ``"none"``. Suffix decoding is ``"suffix"`` with
        :data:`VLLM_SUFFIX_DEFAULTS`. The target's MTP modules are ``"mtp"`` with no ``model``: vLLM builds the
        draft from the target's own checkpoint (``draft_model`` is ignored for them). vLLM 0.34.0 has no parallel
        (PARD) drafting: a parallel draft gets the draft-model config (:meth:`vllm_method`, :meth:`vllm_notes`). A
        batch-size schedule in ``settings`` is passed on as ``num_speculative_tokens_per_batch_size``. Keys: see
        :data:`VLLM_SPECULATIVE_KEYS`.

        Raises:
            ValueError: ``tensor_parallel_size`` or ``draft_tensor_parallel_size`` not an integer from 1 to
                :data:`lab.picker.gpus.MAX_TENSOR_PARALLEL_SIZE`, or a draft
                size other than 1 or ``tensor_parallel_size``; the message names the argument and the allowed
                values.
        """
        tensor_parallel_size = check_gpus("tensor_parallel_size", tensor_parallel_size)
        if draft_tensor_parallel_size is not None:
            draft_tensor_parallel_size = check_gpus("draft_tensor_parallel_size", draft_tensor_parallel_size)
            allowed = sorted({1, tensor_parallel_size})
            if draft_tensor_parallel_size not in allowed:
                raise ValueError(
                    f"draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size "
                    f"({tensor_parallel_size}), i.e. one of {allowed}; got {draft_tensor_parallel_size}")
        method = self.vllm_method()
        if method == "none":
            return {}
        schedule = self.settings.get("num_speculative_tokens_per_batch_size")
        if method == "ngram":
            config = {"method": "ngram", "num_speculative_tokens": self.n_draft, **NGRAM_LOOKUP}
        elif method == "suffix":
            config = {"method": "suffix", "num_speculative_tokens": self.n_draft, **VLLM_SUFFIX_DEFAULTS}
        elif method == "mtp":
            config = {"method": "mtp", "num_speculative_tokens": self.n_draft}
        else:
            name = draft_model if draft_model is not None else PLACEHOLDERS[method]
            config = {"method": {"draft_model": "draft_model", "eagle": "eagle3"}[method], "model": name,
                      "num_speculative_tokens": self.n_draft}
        if schedule:
            config["num_speculative_tokens_per_batch_size"] = schedule
        if method not in ("draft_model", "eagle", "mtp"):
            return config
        if self.draft_temperature:
            # vLLM drafts greedily by default (verified as one-hot); sampling the draft needs its probabilities
            config["draft_sample_method"] = "probabilistic"
        if draft_tensor_parallel_size is not None:
            config["draft_tensor_parallel_size"] = draft_tensor_parallel_size
        return config

    def vllm_method(self) -> str:
        """The course method vLLM 0.34.0 runs for this recommendation (``"none"`` without speculation): the method
        itself when vLLM has it (:data:`VLLM_NATIVE`), else the nearest the workload allows
        (:func:`lab.picker.substitutes.nearest_method`: Lookahead -> ``"ngram"``, Medusa -> a draft model or
        ``"ngram"``, a parallel (PARD) draft -> ``"draft_model"``), ``"none"`` when every substitute is ruled out."""
        return nearest_method(self.method, VLLM_NATIVE, self.workload)

    def vllm_notes(self) -> list:
        """Where vLLM 0.34.0 cannot serve the recommendation as given beyond the rules' own notes (Lookahead's is
        among those), one sentence each: what it runs instead for Medusa or a PARD draft, or that it serves the
        target alone."""
        served = self.vllm_method()
        if self.method not in ("medusa", "parallel"):
            return []
        if served == "none":
            return [no_substitute_note("vLLM 0.34.0", self.method, self.workload)]
        if self.method == "parallel" and served != "draft_model":
            return [fallback_note("vLLM 0.34.0", self.method, served, self.workload)]
        if self.method == "parallel":
            return ["vLLM 0.34.0 has no PARD drafter: its parallel_drafting key is deprecated, has no effect, and "
                    "raises an error for any method but dflash and dspark (SpeculativeConfig in "
                    "vllm/config/speculative.py), whose drafts read the target's hidden states, which a PARD draft "
                    "does not. The vLLM config runs the PARD draft (or the draft it was adapted from) as an ordinary "
                    "draft model instead, one forward per drafted token."]
        nearest = "a draft model" if served == "draft_model" else "n-gram prompt lookup"
        return [f"vLLM 0.34.0 has no Medusa proposer (\"medusa\" left its SpeculativeMethod values); the vLLM config "
                f"runs {nearest} instead. Serve Medusa heads with an older vLLM, or train an EAGLE-3 head."]

    def vllm_json(self, **kwargs) -> str:
        """:meth:`vllm_config` as the JSON text ``--speculative-config`` takes ("" for ``"none"``); same arguments
        and errors."""
        config = self.vllm_config(**kwargs)
        return json.dumps(config) if config else ""

    def vllm_command(self, target: str = "<target-model>", tensor_parallel_size: int = 1,
                     draft_model: str | None = None, draft_tensor_parallel_size: int | None = None) -> str:
        """A ``vllm serve`` command line for this recommendation, shell-quoted.

        ``tensor_parallel_size`` shards the target over that many GPUs (``--tensor-parallel-size``);
        ``draft_model`` and ``draft_tensor_parallel_size`` go into ``--speculative-config`` as in
        :meth:`vllm_config`. Raises ``ValueError`` (naming the argument) for a size that is not an integer from 1
        to :data:`lab.picker.gpus.MAX_TENSOR_PARALLEL_SIZE` and for a draft size vLLM 0.34.0 rejects (anything but
        1 or ``tensor_parallel_size``, for every model-based method: ``_verify_and_get_draft_tp``).
        """
        tensor_parallel_size = check_gpus("tensor_parallel_size", tensor_parallel_size)
        target = check_model_name("target", target)
        parts = ["vllm", "serve", shlex.quote(target)]
        if tensor_parallel_size > 1:
            parts += ["--tensor-parallel-size", str(tensor_parallel_size)]
        text = self.vllm_json(draft_model=draft_model, draft_tensor_parallel_size=draft_tensor_parallel_size,
                              tensor_parallel_size=tensor_parallel_size)
        if text:
            parts += ["--speculative-config", shlex.quote(text)]
        return " ".join(parts)

    # --- transformers --------------------------------------------------------------------------------------
    def hf_method(self) -> str:
        """The course method transformers' ``generate`` runs for this recommendation (``"none"`` without
        speculation): ``"draft_model"`` (an assistant model; a PARD draft runs as one), ``"ngram"`` (prompt lookup)
        or ``"mtp"`` (``use_mtp``); EAGLE, Medusa, Lookahead and suffix decoding get the nearest the workload allows
        (:func:`lab.picker.substitutes.nearest_method`), ``"none"`` when every substitute is ruled out."""
        return nearest_method(self.method, HF_NATIVE, self.workload)

    def hf_notes(self) -> list:
        """Where transformers cannot serve the recommendation beyond the rules' own notes (EAGLE's, Medusa's and
        Lookahead's are among those): suffix decoding and a parallel (PARD) draft (what it runs instead, or that it
        serves the target alone), and the MTP modules' draft length (not a ``generate`` argument)."""
        served = self.hf_method()
        if self.method == "mtp":
            return ["transformers' use_mtp drafts one token per MTP module of the checkpoint (num_mtp_layers in the "
                    "model's config; MTPCandidateGenerator in generation/candidate_generator.py), sampling them when "
                    "do_sample is set; N is not a generate argument, and a model class without MTP layers raises."]
        if self.method not in ("suffix", "parallel"):
            return []
        if served == "none":
            return [no_substitute_note("transformers", self.method, self.workload)]
        if self.method == "parallel" and served != "draft_model":
            return [fallback_note("transformers", self.method, served, self.workload)]
        if self.method == "parallel":
            return ["transformers has no parallel drafter (its speculation_type accepts only \"dflash\", a draft that "
                    "reads the target's hidden states); the settings pass the PARD draft as an assistant_model, which "
                    "drafts one token per forward."]
        return ["transformers has no suffix-decoding drafter; its prompt lookup (prompt_lookup_num_tokens), which "
                "matches only within the request, is the nearest."]

    def hf_kwargs(self, assistant_model=None) -> dict:
        """Keyword arguments for transformers' ``model.generate`` (transformers 5.25.0, :data:`TRANSFORMERS_CHECKED`).

        ``assistant_model``: the loaded draft model to pass (a placeholder string when None). Sampling:
        ``do_sample`` and, when T > 0, ``temperature``. Draft length: for prompt lookup ``prompt_lookup_num_tokens``
        (with ``max_matching_ngram_size``); for an assistant model N is **not** a ``generate`` argument in this
        release — transformers reads ``num_assistant_tokens`` (and ``assistant_confidence_threshold``) from the
        assistant's own generation config, so set :meth:`hf_assistant_config` there. The target's MTP modules:
        ``use_mtp=True`` (transformers drafts one token per module; :meth:`hf_notes`). A parallel (PARD) draft is
        passed as the assistant model (run autoregressively). EAGLE, Medusa and Lookahead have no transformers
        drafter; the nearest one the workload allows is returned (:meth:`hf_method`) and :meth:`hf_notes` says so.
        """
        kwargs = {"do_sample": self.temperature > 0}
        if self.temperature > 0:
            kwargs["temperature"] = self.temperature
        served = self.hf_method()
        if served == "none":
            return kwargs
        if served == "draft_model":
            kwargs["assistant_model"] = assistant_model if assistant_model is not None else \
                PLACEHOLDERS["draft_model"]
        elif served == "mtp":
            kwargs["use_mtp"] = True
        else:
            kwargs["prompt_lookup_num_tokens"] = self.n_draft
            kwargs["max_matching_ngram_size"] = NGRAM_LOOKUP["prompt_lookup_max"]
        return kwargs

    def hf_assistant_config(self) -> dict:
        """Attributes to set on ``assistant_model.generation_config`` (``{}`` without an assistant model).

        - ``num_assistant_tokens`` = N with the ``"constant"`` schedule (transformers' ``"heuristic"`` schedule
          instead grows N by 2 after a full acceptance and shrinks it by 1 after a rejection);
        - ``assistant_confidence_threshold`` = 0.0, so that the assistant drafts all N tokens every step. An unset
          threshold becomes 0.4 in transformers 5.25.0 (``GenerationConfig._get_default_generation_params``): the
          assistant then stops drafting at the first token it gives less than that probability
          (``ConfidenceCriteria`` in ``generation/stopping_criteria.py``), and with scikit-learn installed the
          threshold is re-tuned as it runs (``AssistedCandidateGenerator.update_candidate_strategy``), so the
          draft length varies from step to step. Only a value > 0 adds that stopping rule.
        """
        if self.hf_method() != "draft_model":
            return {}
        return {"num_assistant_tokens": self.n_draft, "num_assistant_tokens_schedule": "constant",
                "assistant_confidence_threshold": 0.0}

    def hf_snippet(self, target: str = "<target-model>") -> str:
        """Python lines that run this recommendation with transformers (names are placeholders to fill).
        ``target`` must be a model name on one line (:func:`lab.picker.substitutes.check_model_name`)."""
        target = check_model_name("target", target)
        lines = ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
                 f"tokenizer = AutoTokenizer.from_pretrained({target!r})",
                 f"target = AutoModelForCausalLM.from_pretrained({target!r})"]
        kwargs = self.hf_kwargs()
        if "assistant_model" in kwargs:
            lines.append(f"assistant = AutoModelForCausalLM.from_pretrained({PLACEHOLDERS['draft_model']!r})")
            for key, value in self.hf_assistant_config().items():
                lines.append(f"assistant.generation_config.{key} = {value!r}")
            kwargs["assistant_model"] = _Raw("assistant")
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        lines += ['inputs = tokenizer("…", return_tensors="pt")',
                  f"out = target.generate(**inputs, max_new_tokens=256, {args})"]
        return "\n".join(lines)

    # --- this course -------------------------------------------------------------------------------------
    def lab_drafter(self) -> str | None:
        """The drafter expression for :func:`lab.decode.generate` in this course (None: autoregressive)."""
        if self.method == "draft_model":
            return f"DraftModelDrafter(pair.draft, n_draft={self.n_draft})"
        if self.method == "ngram":
            return f"PromptLookupDrafter(max_ngram={NGRAM_LOOKUP['prompt_lookup_max']}, n_draft={self.n_draft})"
        if self.method == "lookahead":
            return f"LookaheadDrafter(window={LOOKAHEAD_SETTINGS['window']}, ngram={LOOKAHEAD_SETTINGS['ngram']})"
        if self.method == "medusa":
            return "MedusaDrafter.from_pretrained(pair)"
        if self.method == "eagle":
            return f"EagleDrafter.from_pretrained(pair, n_draft={self.n_draft})"
        if self.method == "suffix":
            return "SuffixDecodingDrafter()"
        if self.method == "mtp":  # the course trains its own MTP heads for its pairs (lab.drafters.mtp)
            return f"MTPDrafter.from_pretrained(pair, n_draft={self.n_draft})"
        if self.method == "parallel":  # the committed parallel draft (Shakespeare pair: lab.drafters.parallel)
            return f"ParallelDrafter.from_pretrained(pair, n_draft={self.n_draft})"
        return None


class _Raw:
    """A name printed as-is inside generated code (its repr is the bare name)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name
