"""Parallel (block) drafting, PARD-style: one draft forward proposes a whole block of K tokens.

Source: An et al. 2025, "PARD: Accelerating LLM Inference with Low-Cost PARallel Draft Model Adaptation"
(arXiv 2504.18583; the authors' code, github.com/AMD-AGI/PARD, ``pard/pard_train.py`` and ``pard/pard_infer.py``,
read for the layout below). Engines: TensorRT-LLM's ``PARD`` decoding type; vLLM 0.34.0's ``parallel_drafting`` key
applies to its dflash and dspark methods only, so vLLM runs a PARD draft as an ordinary draft model.

An autoregressive draft model proposes K tokens with K sequential forwards. A *parallel* draft is the same small
model adapted to one extra input, the **mask token**: fed ``[t_L] + [mask] * (K - 1)`` after its KV cache of the
committed tokens t_0..t_{L-1}, its output at the i-th fed position (i = 1..K) is its distribution for token
t_{L+i}, i places after the last committed one. So one forward over K positions gives K draft tokens: at T = 0 the
argmax of each row, at T > 0 one draw from each row's own distribution (the rows of ``Draft.probs``).

Why verification stays exact: the distribution of position i depends only on the committed prefix (the masks
carry no information about the earlier drafts), and speculative sampling (Leviathan et al. 2023, Algorithm 1)
accepts draft i with min(1, p(x) / q_i(x)) for *any* proposal q_i that is a function of what precedes it; a
proposal that ignores the earlier drafts is one. Only acceptance suffers: position i cannot condition on what the
draft put at positions < i, so it guesses the target's token i places ahead "on average", and α falls with i
faster than an autoregressive draft's.

The mask token is one extra row of the draft's input embedding (and, the draft's embeddings being tied, of its
output layer): id ``mask_token_id`` = the target's vocabulary size, so the parallel draft stays a plain transformers
``LlamaForCausalLM`` saved as safetensors (``config.json`` records ``pard_mask_token_id``,
``pard_target_vocab_size`` and the trained block size ``pard_block_size``). Its logits are cut to the target's
vocabulary: the mask is never proposed. :func:`add_mask_token` makes such a model from an autoregressive draft;
training: :mod:`lab.training.parallel` (``python -m lab train parallel``).

The KV cache holds the committed prefix only: each proposal feeds the tokens committed since the last one (the
accepted drafts and the target's token) followed by the masks, and rolls the masks' entries back
(:func:`lab.kv.rollback`) before it returns, as PARD's inference does (``remove_kv_num = draft_k - 1``).
"""
from __future__ import annotations

from pathlib import Path

import torch

from lab.assets import PAIR_DIR, SMOLLM2_DIR, check_model_type, check_target_key
from lab.drafters.base import Draft, DraftRequest, check_pair, check_request, draft_token
from lab.kv import cache_length, rollback
from lab.models import context_limit, forward, new_cache, vocab_size
from lab.validation import check_int, check_token_ids, is_integer

__all__ = ["PARALLEL_DIRS", "MASK_KEY", "TARGET_VOCAB_KEY", "BLOCK_KEY", "ParallelDrafter", "add_mask_token"]

PARALLEL_DIRS = {"shakespeare": PAIR_DIR / "parallel", "smollm2-135m": SMOLLM2_DIR / "parallel"}
"""The committed parallel drafts, by pair name (``python -m lab train parallel``; the real pair's from ``python -m
lab train chat-parallel --out lab/assets/smollm2-135m/parallel``)."""

MASK_KEY = "pard_mask_token_id"
"""The ``config.json`` entry holding the mask token's id."""
TARGET_VOCAB_KEY = "pard_target_vocab_size"
"""The ``config.json`` entry holding the vocabulary the draft proposes from (the target's; the mask lies above)."""
BLOCK_KEY = "pard_block_size"
"""The ``config.json`` entry holding the largest K the draft was trained for (1 real + K - 1 mask positions)."""


def add_mask_token(model, block_size: int | None = None):
    """Give the causal LM ``model`` (an autoregressive draft, changed in place and returned) a mask token: one new
    row at the end of its input embedding, initialised to the mean of the existing rows (and of its output layer,
    the same row when the embeddings are tied), with the config entries :data:`MASK_KEY` = the old vocabulary size
    V, :data:`TARGET_VOCAB_KEY` = V and, when given, :data:`BLOCK_KEY` = ``block_size``. The vocabulary grows to
    V + 1; ids below V keep their rows, so the model's logits over them are unchanged. Raises ``TypeError`` for a
    model without embeddings and ``ValueError`` for ``block_size`` < 1 or a model that already has a mask token."""
    if not callable(getattr(model, "get_input_embeddings", None)):
        raise TypeError(f"model must be a transformers causal LM (e.g. pair.draft), got {type(model).__name__}")
    if getattr(model.config, MASK_KEY, None) is not None:
        raise ValueError(f"model already has a mask token (config.{MASK_KEY} = {getattr(model.config, MASK_KEY)})")
    if block_size is not None:
        block_size = check_int("block_size", block_size, 1)
    old = vocab_size(model)
    with torch.no_grad():
        mean_in = model.get_input_embeddings().weight.mean(0).clone()
        mean_out = model.get_output_embeddings().weight.mean(0).clone()
        model.resize_token_embeddings(old + 1, mean_resizing=False)
        model.get_input_embeddings().weight[old] = mean_in
        if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
            model.get_output_embeddings().weight[old] = mean_out
    setattr(model.config, MASK_KEY, old)
    setattr(model.config, TARGET_VOCAB_KEY, old)
    if block_size is not None:
        setattr(model.config, BLOCK_KEY, block_size)
    return model


class ParallelDrafter:
    """Drafter protocol (:mod:`lab.drafters.base`) around a parallel draft model (PARD): ``n_draft`` tokens from one
    forward over ``[pending tokens] + [mask] * (n_draft - 1)``.

    Arguments: ``draft_model`` (a transformers causal LM with a mask token, :func:`add_mask_token`), ``n_draft``
    (K, tokens per proposal; any K >= 1 runs, but positions beyond the trained ``block_size`` were never trained),
    ``mask_token_id`` and ``vocab_size`` (default: the model config's :data:`MASK_KEY` / :data:`TARGET_VOCAB_KEY`;
    ``vocab_size`` is the target's vocabulary, the logits' columns from it on, the mask's included, are dropped).

    State: a KV cache of every committed token but ``pending`` (those committed since the last forward: after
    ``reset`` the last token it received, in the decode loop the prefill's first new token; after a step the
    accepted drafts and the target's token). :meth:`propose` feeds ``pending`` and the masks, reads the last K
    rows of logits (float32 ``[K, vocab_size]``: the newest committed token's row drafts token 1, mask row i drafts
    token i + 1) and rolls the masks' K - 1 cache entries back, so the cache again holds exactly the committed
    tokens. At T = 0 each token is its row's argmax and ``Draft.probs`` is None (one-hot verification); at T > 0
    each is drawn from ``lab.sampling.probs_from_logits`` of its row with the request's settings and generator, the
    float32 ``[K, vocab_size]`` rows (CPU) returned for rejection sampling. ``Draft.calls`` is 1: one forward per
    proposal.

    Raises ``TypeError`` when ``draft_model`` is not a causal LM, ``ValueError`` for ``n_draft`` < 1, a model without
    a mask token, a mask id / vocabulary outside the model's vocabulary, or a mask id inside the target's vocabulary
    (below ``vocab_size``: it could be drafted).
    """

    def __init__(self, draft_model, n_draft: int = 4, mask_token_id: int | None = None,
                 vocab_size: int | None = None):
        if not callable(getattr(draft_model, "get_output_embeddings", None)):
            raise TypeError(f"draft_model must be a transformers causal LM with a mask token (add_mask_token, or "
                            f"ParallelDrafter.from_pretrained(pair)), got {type(draft_model).__name__}")
        self.n_draft = check_int("n_draft", n_draft, 1)
        config = draft_model.config
        mask = getattr(config, MASK_KEY, None) if mask_token_id is None else mask_token_id
        if mask is None:
            raise ValueError(f"mask_token_id: the draft model has no mask token (no config.{MASK_KEY}); adapt it with "
                             "add_mask_token(model) and train it (python -m lab train parallel), or pass the id")
        width = _model_vocab(draft_model)
        if not is_integer(mask) or not 0 <= mask < width:
            raise ValueError(f"mask_token_id must be an id in [0, {width}) (the draft's vocabulary), got {mask!r}")
        vocab = getattr(config, TARGET_VOCAB_KEY, None) if vocab_size is None else vocab_size
        vocab = int(mask) if vocab is None else vocab
        if not is_integer(vocab) or not 1 <= vocab <= width:
            raise ValueError(f"vocab_size must be in [1, {width}] (the draft's vocabulary), got {vocab!r}")
        if mask < vocab:  # the drafts come from the first vocab_size logits: a mask among them could be proposed
            raise ValueError(f"mask_token_id must lie past the target's vocabulary (>= vocab_size = {vocab}), got "
                             f"{int(mask)}: the mask is never proposed only if it is not a target token")
        self.model = draft_model
        self.mask_token_id = int(mask)
        self.vocab_size = int(vocab)  # generate() checks it against the target's
        self.block_size = getattr(config, BLOCK_KEY, None)
        self.context_limit = context_limit(draft_model)
        self._cache = None
        self._pending: list[int] = []
        self._last: list[int] = []
        self._fed = False

    @classmethod
    def from_pretrained(cls, pair, n_draft: int = 4, directory=None) -> ParallelDrafter:
        """The committed parallel draft of ``pair`` (:data:`PARALLEL_DIRS`; ``directory`` overrides: a folder with
        ``config.json`` and ``model.safetensors``, loaded with ``use_safetensors=True``) in the target's dtype and on
        its device, drafting ``n_draft`` tokens per forward. Raises ``TypeError`` when ``pair`` is not a
        ``ModelPair``, ``FileNotFoundError`` for a pair without a committed parallel draft or missing files (naming
        ``python -m lab train parallel``), ``ValueError`` when the folder holds another kind of draft
        (:func:`lab.assets.check_model_type`) or the draft was trained for another target (its vocabulary or
        :data:`lab.assets.TARGET_KEY`). A folder whose weights hold ``embed_projection`` (the real
        pair's, :mod:`lab.training.chat_parallel`) is loaded with :func:`lab.models.load_projected_draft`: its
        embedding is the target's (float32, :func:`lab.models.full_precision_embedding`) times that projection,
        plus the mask row."""
        import json

        from safetensors import safe_open
        from transformers import AutoModelForCausalLM

        from lab.models import full_precision_embedding, load_projected_draft

        check_pair(pair, "ParallelDrafter.from_pretrained")
        if directory is None:
            if pair.name not in PARALLEL_DIRS:
                raise FileNotFoundError(
                    f"no parallel draft for the {pair.name!r} pair: one is committed for "
                    f"{', '.join(map(repr, PARALLEL_DIRS))} only; pass directory= for a draft of your own")
            directory = PARALLEL_DIRS[pair.name]
        directory = Path(directory)
        for name in ("config.json", "model.safetensors"):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"no parallel draft at {directory}: {name} is missing; train it with "
                                        "`python -m lab train parallel` (the real pair's: `train chat-parallel`) "
                                        "or restore lab/assets from git")
        config = json.loads((directory / "config.json").read_text())
        check_model_type(config, "lab-parallel", directory)
        if config.get(TARGET_VOCAB_KEY) != vocab_size(pair.target):
            raise ValueError(f"the parallel draft in {directory} drafts over {config.get(TARGET_VOCAB_KEY)} tokens, "
                             f"the {pair.name!r} target's vocabulary has {vocab_size(pair.target)}")
        with safe_open(str(directory / "model.safetensors"), "pt") as weights:
            projected = "embed_projection" in weights.keys()
        # a projected draft is the real pair's (train chat-parallel), a plain one the Shakespeare pair's
        check_target_key(config, pair.target, directory, "a parallel draft",
                         "python -m lab train " + ("chat-parallel" if projected else "parallel"))
        param = next(pair.target.parameters())
        if projected:
            model = load_projected_draft(directory, pair.target, full_precision_embedding(pair.target),
                                         rebuild="python -m lab train chat-parallel")
        else:
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=param.dtype, use_safetensors=True,
                                                         local_files_only=True).to(param.device).eval()
        return cls(model, n_draft=n_draft)

    def __repr__(self) -> str:
        return (f"ParallelDrafter(n_draft={self.n_draft}, block_size={self.block_size}, "
                f"mask_token_id={self.mask_token_id})")

    # -- protocol -------------------------------------------------------------------------------------------
    def reset(self, prompt_ids) -> None:
        """Prefill the draft cache with every token of ``prompt_ids`` but the last, which the first proposal feeds
        (the decode loop resets with the prompt and the prefill's first new token: the whole prompt is prefilled).
        Raises ``ValueError`` for an empty ``prompt_ids`` or an id outside the target's vocabulary (the mask
        included), ``TypeError`` for ids that are not integers."""
        prompt_ids = check_token_ids("prompt_ids", prompt_ids, self.vocab_size)
        self._cache = new_cache()
        if len(prompt_ids) > 1:
            forward(self.model, prompt_ids[:-1], self._cache, logits_to_keep=1)
        self._pending = prompt_ids[-1:]
        self._last, self._fed = [], False

    @torch.inference_mode()
    def block_logits(self, n: int) -> torch.Tensor:
        """One forward over the pending tokens and ``n - 1`` masks: float32 logits ``[n, vocab_size]``, row i the
        draft's distribution (before sampling settings) for the token i + 1 places after the newest committed
        token. The pending tokens enter the cache, the masks' entries are rolled back. Raises ``RuntimeError``
        before :meth:`reset` or when the pending tokens were already fed (call :meth:`update` first)."""
        if self._cache is None:
            raise RuntimeError("call reset(prompt_ids) before propose()")
        if not self._pending:
            raise RuntimeError("the committed tokens were already fed: call update(num_accepted, next_token) first")
        n = check_int("n", n, 1)
        committed = cache_length(self._cache) + len(self._pending)
        logits = forward(self.model, self._pending + [self.mask_token_id] * (n - 1), self._cache, logits_to_keep=n)
        rollback(self._cache, committed)
        self._pending, self._fed = [], True
        return logits[:, :self.vocab_size]

    def propose(self, request: DraftRequest) -> Draft:
        """Draft ``min(n_draft, request.max_tokens)`` tokens with one forward (:meth:`block_logits`); an empty
        ``Draft()`` (no forward) when nothing may be drafted. Raises ``RuntimeError`` before :meth:`reset`."""
        check_request(request)
        if self._cache is None:
            raise RuntimeError("call reset(prompt_ids) before propose()")
        n = min(self.n_draft, int(request.max_tokens))
        self._last = []
        if n <= 0:
            return Draft()
        tokens, rows = [], []
        for row in self.block_logits(n):
            token, probs = draft_token(row, request)
            tokens.append(token)
            if probs is not None:
                rows.append(probs)
        self._last = tokens
        return Draft(list(tokens), torch.stack(rows) if rows else None, calls=1)

    def update(self, num_accepted: int, next_token: int) -> None:
        """Queue what the cache has not seen: the ``num_accepted`` accepted drafts and ``next_token`` (after a step
        that drafted nothing, these join the tokens still pending). The cache itself was rolled back in
        :meth:`propose`. Raises ``ValueError`` for ``num_accepted`` outside ``[0, drafted]``."""
        if self._cache is None:
            raise RuntimeError("ParallelDrafter.update before reset: reset(prompt_ids) starts a generation")
        num_accepted = check_int("num_accepted", num_accepted, 0)
        if num_accepted > len(self._last):
            raise ValueError(f"num_accepted ({num_accepted}) cannot exceed the drafted tokens ({len(self._last)})")
        accepted = self._last[:num_accepted] + [check_int("next_token", next_token, 0, self.vocab_size - 1)]
        self._pending = accepted if self._fed else self._pending + accepted
        self._last, self._fed = [], False

    def kv_length(self) -> int:
        """Positions in the draft's KV cache (0 before ``reset``): committed tokens only, slot i = token i."""
        return 0 if self._cache is None else cache_length(self._cache)


def _model_vocab(model) -> int:
    """Rows of the model's output layer (its vocabulary, the mask token's row included)."""
    return vocab_size(model)
