"""EAGLE: a draft that extrapolates the target's own last-layer features, one transformer layer deep.

Source: Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty", §3–4. The target's
feature f_j (its last hidden state after the final norm, the input of its LM head) already decides x_{j+1}; EAGLE
predicts the *next feature* f_{j+1} from (f_j, embedding of x_{j+1}) — the token resolves which continuation the
target took, the feature carries everything the target computed so far — and reads the next token off the
target's own LM head. Drafting continues autoregressively on the draft's own predicted features; the target's
true features replace them after every verification.

Training lives in :mod:`lab.training.eagle` (``python -m lab train eagle``) and :mod:`lab.training.chat_eagle`
(``train chat-eagle``, the real pair's, with a reduced draft vocabulary); the committed weights, per pair, are in
:data:`EAGLE_DIRS` (``lab/assets/<pair>/eagle/``: safetensors + config.json).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import torch

from lab.assets import EAGLE_DIR, SMOLLM2_DIR, TARGET_KEY, check_model_type, check_target_key, target_weights_key
from lab.drafters.base import Draft, DraftRequest, TargetOutput, check_pair, check_request, draft_token
from lab.drafters.draft_vocab import check_draft_vocab, full_vocab_logits
from lab.drafters.dynamic_tree import DynamicTree, expand_level, rerank, top_children
from lab.kv import cache_length, rollback
from lab.models import LAST_LAYER, cache_kwarg, new_cache, vocab_size
from lab.trees import position_ids as tree_position_ids
from lab.trees import check_choices, choices_parents, tree_attention_mask
from lab.validation import check_int, check_token_ids, is_integer

__all__ = ["DEFAULT_TREE", "EAGLE_DIR", "EAGLE_DIRS", "EagleDraftModel", "EagleDrafter", "trainable_parameters",
           "draft_layer_config", "draft_layer", "run_draft_layer", "full_vocab_logits", "check_step_inputs",
           "saved_draft_vocab"]

EAGLE_DIRS = {"shakespeare": EAGLE_DIR, "smollm2-135m": SMOLLM2_DIR / "eagle"}
"""The committed EAGLE drafts, by pair name (``python -m lab train eagle`` / ``train chat-eagle``)."""


# A small static tree over top-k ranks (the same notation as Medusa's "choices"): 2 first tokens, 2 + 1 second
# tokens, a third on the most likely branch. 6 nodes, depth 3.
DEFAULT_TREE = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]


def trainable_parameters(model: torch.nn.Module) -> int:
    """Number of parameters of ``model`` that training updates (``requires_grad``). For an
    :class:`EagleDraftModel` that is the fusion, the decoder layer, its norm and the up-projection: the target's
    embedding and LM head are shared and frozen, not counted."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def draft_layer_config(target, cfg: dict) -> dict:
    """The architecture ``cfg`` (``width``, ``heads``, ``kv_heads``, ``intermediate``) of a one-layer draft for
    ``target``, checked and completed with what it takes from the target: ``feature_size`` (D), ``vocab_size``,
    ``max_positions``, ``rope_theta``, ``rms_norm_eps``. Shared by the EAGLE and EAGLE-3 drafts. Raises
    ``ValueError`` naming the key if ``width`` is not a positive multiple of ``heads`` or ``heads`` of
    ``kv_heads``."""
    width, heads, kv_heads = int(cfg["width"]), int(cfg["heads"]), int(cfg["kv_heads"])
    if width < 1 or heads < 1 or width % heads:
        raise ValueError(f"config['width'] ({width}) must be a positive multiple of config['heads'] ({heads})")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"config['heads'] ({heads}) must be a multiple of config['kv_heads'] ({kv_heads})")
    tcfg = target.config
    rope = getattr(tcfg, "rope_parameters", None) or {}
    return {**cfg, "feature_size": int(tcfg.hidden_size), "vocab_size": vocab_size(target),
            "max_positions": int(getattr(tcfg, "max_position_embeddings", 2048) or 2048),
            "rope_theta": float(rope.get("rope_theta", getattr(tcfg, "rope_theta", 10000.0))),
            "rms_norm_eps": float(getattr(tcfg, "rms_norm_eps", 1e-6))}


def draft_layer(config: dict):
    """One Llama decoder layer and its final RMS norm at width ``config["width"]`` (:func:`draft_layer_config`),
    as a 1-layer ``transformers.LlamaModel`` fed ``inputs_embeds`` only (its 1-row embedding table is frozen and
    unused), so KV caching, RoPE positions and 4-D masks work as in the target."""
    from transformers import LlamaConfig, LlamaModel

    layer_cfg = LlamaConfig(vocab_size=1, hidden_size=config["width"], intermediate_size=int(config["intermediate"]),
                            num_hidden_layers=1, num_attention_heads=int(config["heads"]),
                            num_key_value_heads=int(config["kv_heads"]),
                            max_position_embeddings=config["max_positions"],
                            rope_theta=config["rope_theta"], rms_norm_eps=config["rms_norm_eps"],
                            pad_token_id=None, bos_token_id=None, eos_token_id=None, tie_word_embeddings=False)
    layer = LlamaModel(layer_cfg)
    layer.embed_tokens.weight.requires_grad_(False)  # unused: the fused input replaces it
    return layer


def run_draft_layer(layer, cache_kw: str, x: torch.Tensor, cache=None, position_ids=None,
                    attention_mask=None) -> torch.Tensor:
    """Run a :func:`draft_layer` on inputs ``x`` ``[B, n, width]``: its output ``[B, n, width]`` after the norm.

    ``cache`` (a ``DynamicCache`` passed as ``cache_kw``, :func:`lab.models.cache_kwarg`) is appended to, None
    for none; ``position_ids`` ``[B, n]`` / ``[n]`` (default: from the cache length on); ``attention_mask`` an
    optional bool ``[n, n]`` over the new rows (cached positions all visible) or ``[n, past + n]`` (True = may
    attend), default causal. Raises ``ValueError`` for a mask of another shape."""
    kwargs = {"inputs_embeds": x, "use_cache": cache is not None}
    if cache is not None:
        kwargs[cache_kw] = cache
    n = x.size(1)
    if position_ids is not None:
        kwargs["position_ids"] = torch.as_tensor(position_ids, dtype=torch.long, device=x.device).view(-1, n)
    if attention_mask is not None:
        past = cache_length(cache) if cache is not None else 0
        allow = torch.as_tensor(attention_mask, dtype=torch.bool, device=x.device)
        if allow.shape == (n, n):
            allow = torch.cat([torch.ones(n, past, dtype=torch.bool, device=x.device), allow], dim=1)
        if allow.shape != (n, past + n):
            raise ValueError(f"attention_mask must be bool [n, n] = [{n}, {n}] or [n, past + n] = "
                             f"[{n}, {past + n}], got {tuple(allow.shape)}")
        additive = torch.zeros(allow.shape, dtype=x.dtype, device=x.device)
        additive.masked_fill_(~allow, torch.finfo(x.dtype).min)  # 0 = attend (eager and sdpa)
        kwargs["attention_mask"] = additive[None, None].expand(x.size(0), 1, n, past + n)
    return layer(**kwargs).last_hidden_state


def check_step_inputs(features: torch.Tensor, tokens, width: int, what: str, *, letter: str = "D",
                      hint: str = "", device=None) -> tuple:
    """The input checks of one draft step over (feature, next token) pairs, shared by
    :meth:`EagleDraftModel.forward` and :meth:`lab.drafters.eagle3.Eagle3DraftModel.forward`.

    Args:
        features: ``[B, n, width]`` or unbatched ``[n, width]`` float features (any float dtype).
        tokens: ``[B, n]`` or ``[n]`` token ids (anything ``torch.as_tensor`` takes), the token after each feature.
        width: the feature width the draft expects.
        what: what the features must be, with their width, for the error (e.g. "the target's hidden states, width
            D = 576").
        letter: the width's letter in the shape error (``"D"``: the target's width; ``"d"``: the draft's).
        hint: text appended to the width error (e.g. what to call first).
        device: where the draft's weights are (None: leave ``features`` where they are); ``features`` move there,
            so that CPU inputs reach a draft on CUDA.

    Returns:
        ``(features [B, n, width], tokens LongTensor [B, n] on the features' device, unbatched)``; ``unbatched`` is
        True when a batch axis of 1 was added, for the caller to drop it from its output again.

    Raises:
        ValueError: ``features`` not 2-D / 3-D or ``tokens`` not of its leading shape ("features [B, n, D] and
            tokens [B, n] must agree, got ..."), or a feature width other than ``width`` ("features must be
            {what}, got width ...{hint}").
    """
    if device is not None and isinstance(features, torch.Tensor):
        features = features.to(device)
    unbatched = features.dim() == 2
    if unbatched:
        features, tokens = features[None], torch.as_tensor(tokens)[None]
    tokens = torch.as_tensor(tokens, dtype=torch.long, device=features.device)
    if features.dim() != 3 or tokens.shape != features.shape[:2]:
        raise ValueError(f"features [B, n, {letter}] and tokens [B, n] must agree, got {tuple(features.shape)} and "
                         f"{tuple(tokens.shape)}")
    if features.size(-1) != width:
        raise ValueError(f"features must be {what}, got width {features.size(-1)}{hint}")
    return features, tokens, unbatched


class EagleDraftModel(torch.nn.Module):
    """The EAGLE draft head of a target LM: ``(f_j, x_{j+1}) -> f̂_{j+1}``.

    Structure (Li et al. 2024, §4 "Architecture"): ``fusion = Linear(2D -> d)`` on the concatenation of the
    feature and the token's embedding, ONE Llama decoder layer (attention with RoPE and its own KV cache, SwiGLU
    MLP) of width ``d``, an RMS norm, and ``up = Linear(d -> D)`` back to the target's feature space. Logits of
    x_{j+2} are the target's LM head applied to f̂_{j+1}.

    Departure from EAGLE, on purpose: EAGLE keeps the target's width D in its layer; here the layer works at a
    bottleneck width ``d`` < D (default 160 of D = 384) so the whole draft has fewer trainable parameters than the
    bundled vanilla draft model (475,520), which makes the acceptance comparison about the *idea* (reuse the
    target's features) rather than about size. Parameter count is not cost: each draft token also goes through
    the target's LM head (D × V, shared and frozen, so not counted as trainable), so per draft token this draft
    does more multiply-adds than the vanilla one (lesson 11). ``kv_heads`` < ``heads`` gives grouped-query
    attention.

    The decoder layer is a 1-layer ``transformers.LlamaModel`` fed ``inputs_embeds`` (its own 1-row embedding
    table is unused and frozen), so KV caching (``DynamicCache``), RoPE positions and 4-D masks work exactly as in
    the target. The target's input embedding and LM head are *shared* with the target (not copies, not registered
    as submodules, never trained or saved).

    Arguments: ``target`` (a transformers causal LM with tied or untied embeddings), the architecture
    ``config`` dict (keys ``width``, ``heads``, ``kv_heads``, ``intermediate``; defaults below) and
    ``draft_vocab``: None (the draft scores the whole vocabulary) or LongTensor ``[V_d]`` of target ids, a reduced
    draft vocabulary (:mod:`lab.drafters.draft_vocab`: FR-Spec, EAGLE-3's d2t): the head is then the target's
    LM-head rows of those ids and every other token gets probability 0. The draft is built in float32 on the
    target's device. Raises ``ValueError`` if ``width`` is not
    divisible by ``heads`` or ``heads`` by ``kv_heads``, or for a malformed ``draft_vocab``.
    """

    DEFAULTS: ClassVar[dict] = {"width": 160, "heads": 5, "kv_heads": 5, "intermediate": 384}

    def __init__(self, target, config: dict | None = None, draft_vocab=None):
        super().__init__()
        self.config = draft_layer_config(target, dict(self.DEFAULTS, **(config or {})))
        feature, width = self.config["feature_size"], self.config["width"]
        # Shared, frozen parts of the target: plain attributes, so they are neither parameters nor saved.
        object.__setattr__(self, "target", target)
        self.fusion = torch.nn.Linear(2 * feature, width)
        self.layer = draft_layer(self.config)  # decoder layer + final norm; fed inputs_embeds only
        self.up = torch.nn.Linear(width, feature)
        self._cache_kwarg = cache_kwarg(type(self.layer))
        self.config["draft_vocab_size"] = None
        if draft_vocab is not None:
            ids = check_draft_vocab(draft_vocab, self.config["vocab_size"])
            self.config["draft_vocab_size"] = int(ids.numel())
            self.register_buffer("draft_vocab", ids)  # saved with the weights: the d2t table
            head = target.get_output_embeddings()
            # the target's LM-head rows of the draft vocabulary: derived, frozen, never saved
            self.register_buffer("head_rows", head.weight.detach()[ids].float().clone(), persistent=False)
            bias = getattr(head, "bias", None)
            self.register_buffer("head_bias", None if bias is None else bias.detach()[ids].float().clone(),
                                 persistent=False)
        self.to(target.get_input_embeddings().weight.device)  # the target's: a split model fails at its first forward

    # -- the shared target parts ----------------------------------------------------------------------------
    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The target's input embedding of ``tokens`` (LongTensor ``[...]``) -> ``[..., D]``."""
        return self.target.get_input_embeddings()(tokens)

    def head_logits(self, features: torch.Tensor) -> torch.Tensor:
        """The draft's head on features ``[..., D]`` (any float dtype, any device) -> logits float32 ``[..., V_d]``
        over the draft vocabulary (``[..., V]``, the target's LM head, without one), on the head's device. Training
        scores these."""
        if self.config["draft_vocab_size"] is None:
            head = self.target.get_output_embeddings()
            return head(features.to(head.weight.device, head.weight.dtype)).float()
        return torch.nn.functional.linear(features.to(self.head_rows.device, self.head_rows.dtype), self.head_rows,
                                          self.head_bias).float()

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """Logits ``[..., V]`` float32 over the target's whole vocabulary for features ``[..., D]``: the target's LM
        head, or with a draft vocabulary its rows' logits in place and ``-inf`` (probability 0) elsewhere."""
        reduced = self.head_logits(features)
        if self.config["draft_vocab_size"] is None:
            return reduced
        return full_vocab_logits(reduced, self.draft_vocab, self.config["vocab_size"])

    # -- the draft ----------------------------------------------------------------------------------------
    def forward(self, features: torch.Tensor, tokens: torch.Tensor, cache=None, position_ids=None,
                attention_mask=None) -> torch.Tensor:
        """Predict the next features.

        - ``features``: ``[B, n, D]`` (or ``[n, D]``) target or predicted features f_j, any float dtype.
        - ``tokens``: LongTensor ``[B, n]`` (or ``[n]``): x_{j+1}, the token that followed each feature.
        - ``cache``: a ``DynamicCache`` to append to (None = no caching, e.g. training).
        - ``position_ids``: ``[B, n]`` / ``[n]`` ints. The convention of this module (training and drafting): the
          pair (f_j, x_{j+1}) sits at position j + 1, the position of x_{j+1}. Default: from the cache length on
          (one less; RoPE scores depend on position differences only, so the result is the same up to rounding).
        - ``attention_mask``: optional bool ``[n, n]`` over the new rows (cached positions all visible) or
          ``[n, past + n]`` over cache and new rows (True = may attend); default causal.

        Returns predicted f̂_{j+1}, ``[B, n, D]`` (``[n, D]`` for unbatched input) in the model's dtype. Raises
        ``ValueError`` for mismatched shapes.
        """
        width = self.config["feature_size"]
        features, tokens, unbatched = check_step_inputs(features, tokens, width,
                                                        f"the target's hidden states, width D = {width}",
                                                        device=self.fusion.weight.device)
        dtype = self.fusion.weight.dtype
        x = self.fusion(torch.cat([features.to(dtype), self.embed(tokens).to(dtype)], dim=-1))
        pred = self.up(run_draft_layer(self.layer, self._cache_kwarg, x, cache, position_ids, attention_mask))
        return pred[0] if unbatched else pred

    # -- files ----------------------------------------------------------------------------------------------
    def save_pretrained(self, directory) -> Path:
        """Write ``model.safetensors`` (float16, trainable parts only) and ``config.json`` to ``directory``;
        returns the directory. The config records the target's :func:`lab.assets.target_weights_key`, so
        :meth:`from_pretrained` refuses the draft for another target."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to("cpu", torch.float16 if v.is_floating_point() else v.dtype).contiguous()
                 for k, v in self.state_dict().items() if not k.startswith("layer.embed_tokens")}
        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
        config = {"model_type": "lab-eagle", **self.config, TARGET_KEY: target_weights_key(self.target)}
        (directory / "config.json").write_text(json.dumps(config, indent=1))
        return directory

    @classmethod
    def from_pretrained(cls, target, directory=EAGLE_DIR) -> EagleDraftModel:
        """Load weights saved by :meth:`save_pretrained` for ``target`` (safetensors only), in the target's dtype
        and on its device, in eval mode. Raises ``FileNotFoundError`` (naming the path and the training command)
        when the files are missing, ``ValueError`` when the folder holds another kind of draft
        (:func:`lab.assets.check_model_type`) or when they were made for a target of another width or
        vocabulary, or for another target than ``target`` (a re-trained one: its ``config.json`` records another
        :func:`lab.assets.target_weights_key`; retrain with ``python -m lab train eagle``). Configs without that
        record load unchecked."""
        from safetensors.torch import load_file

        directory = Path(directory)
        weights, config_path = directory / "model.safetensors", directory / "config.json"
        if not weights.is_file() or not config_path.is_file():
            raise FileNotFoundError(f"no EAGLE draft weights at {directory} (model.safetensors + config.json); "
                                    "train them with `python -m lab train eagle` (Shakespeare) or `train chat-eagle` "
                                    "(smollm2-135m)")
        config = json.loads(config_path.read_text())
        check_model_type(config, "lab-eagle", directory)
        state = load_file(str(weights))
        draft_vocab = state.pop("draft_vocab", None)
        if (draft_vocab is None) != (config.get("draft_vocab_size") is None):
            raise ValueError(f"{directory}: config.json and model.safetensors disagree on the draft vocabulary")
        # before building: a draft vocabulary of another target's ids would fail with a less helpful message
        for key, mine in (("feature_size", int(target.config.hidden_size)), ("vocab_size", vocab_size(target))):
            if config.get(key) != mine:
                raise ValueError(f"the EAGLE draft in {directory} was trained for {key} {config.get(key)}, this "
                                 f"target has {mine}")
        model = cls(target, {k: config[k] for k in cls.DEFAULTS if k in config}, draft_vocab=draft_vocab)
        # a draft with a draft vocabulary is the real pair's (train chat-eagle), one without the Shakespeare pair's
        check_target_key(config, target, directory, "an EAGLE draft",
                         "python -m lab train " + ("eagle" if draft_vocab is None else "chat-eagle"))
        if draft_vocab is not None:
            state["draft_vocab"] = draft_vocab
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.startswith("layer.embed_tokens")]
        if missing or unexpected:
            raise ValueError(f"{weights} does not match the EAGLE draft: missing {missing}, unexpected {unexpected}")
        param = next(target.parameters())
        return model.to(device=param.device, dtype=param.dtype).eval()


def saved_draft_vocab(pair) -> torch.Tensor | None:
    """The draft vocabulary of ``pair``'s committed EAGLE draft (:data:`EAGLE_DIRS`), LongTensor ``[V_d]`` of token
    ids, most frequent first: for the real pair the 8,192 most frequent answer tokens of its chat data (the card's
    ``draft_vocab_coverage``). None when the pair has no committed EAGLE draft or its draft scores the whole
    vocabulary (the Shakespeare pair's). Read without loading the draft's weights. Any drafter of that pair may
    share it (``DraftModelDrafter(pair.draft, n, draft_vocab=...)``, FR-Spec)."""
    from safetensors import safe_open

    directory = EAGLE_DIRS.get(getattr(pair, "name", None))
    weights = None if directory is None else Path(directory) / "model.safetensors"
    if weights is None or not weights.is_file():
        return None
    with safe_open(str(weights), "pt") as file:
        return file.get_tensor("draft_vocab").long() if "draft_vocab" in file.keys() else None


def _tree_layout(tree, vocab: int) -> tuple[list, list, list]:
    """The tree's rank paths sorted parents first, their parents array and depths (:func:`lab.trees.check_choices`;
    ``ValueError`` for a malformed tree or a rank not below ``vocab``)."""
    paths = check_choices(tree, max_rank=vocab, name="tree")
    return paths, choices_parents(paths), [len(p) for p in paths]


class EagleDrafter:
    """Drafter protocol (:mod:`lab.drafters.base`) around an :class:`EagleDraftModel` (Li et al. 2024, §3–4).

    State: the draft layer's KV cache holds only *true* pairs (target feature f_j, committed token x_{j+1}); the
    pairs learnt since the last proposal wait in ``pending`` and are fed by the next ``propose`` in one forward.
    Draft rows are appended during a proposal and rolled back (:func:`lab.kv.rollback`) before it returns.

    - Chain mode (``tree=None``): ``n_draft`` tokens, each from the draft's own previous predicted feature.
      At T = 0 argmax and ``Draft.probs`` None; at T > 0 sampled from ``lab.sampling.probs_from_logits`` with the
      request's settings and generator, the rows ``[n, V]`` float32 CPU returned for rejection sampling.
    - Tree mode (``tree`` = paths over top-k ranks, e.g. :data:`DEFAULT_TREE`): node ``(r1, …, rk)`` is the
      rank-rk token of the draft's distribution after the node ``(r1, …, r(k-1))``; one draft forward per depth,
      nodes seeing the true pairs, their ancestors and themselves. Deterministic (``probs=None`` → one-hot
      verification, exact at any temperature). Paths deeper than ``request.max_tokens`` are left out.
    - Dynamic tree mode (``tree`` = a :class:`lab.drafters.dynamic_tree.DynamicTree`, EAGLE-2 §4, SGLang's
      ``--speculative-eagle-topk`` > 1): each level feeds the ``topk`` nodes of highest value (the product of the
      draft's probabilities along the path) and scores their top-``topk`` children; of all the nodes drafted, the
      ``num_draft_tokens - 1`` of highest value are verified. One draft forward per level after the first,
      ``num_steps`` levels at most (fewer when ``request.max_tokens`` is smaller). Deterministic, as a static tree.
      ``last_candidates`` keeps what the last proposal drafted before reranking (lesson 11's exercise):
      ``{"tokens": [C] ids, "values": FloatTensor [C], "parents": [C] (-1 or an earlier candidate)}``.

    Give ``n_draft`` for a chain (default 4) or ``tree`` for a tree, not both: a tree's shape fixes how far a step
    drafts, so ``n_draft`` is then set to the tree's depth (its number of levels; a dynamic tree's ``num_steps``)
    and may only be passed if it equals that depth.

    ``needs_hidden_states = True``: the decode loop resets it with ``reset(prompt_ids, hidden=...)`` and hands it
    each step's :class:`~lab.drafters.base.TargetOutput` through ``observe`` before ``update``.
    Raises ``ValueError`` for ``n_draft`` < 1, an ``n_draft`` that contradicts ``tree``, a malformed ``tree`` (a rank
    must be below the draft's vocabulary, V_d for a reduced one, and a dynamic tree's ``topk`` at most V_d), or a
    draft made for a target of another width or vocabulary (it reads its own target's embedding and LM head);
    ``TypeError`` when ``target`` is not a causal LM or ``draft_model`` is not an :class:`EagleDraftModel`.
    """

    needs_hidden_states = True
    hidden_layers = LAST_LAYER  # the target layers it reads (lab.models.layer_states); EAGLE-3 reads three
    model_class: ClassVar[type] = EagleDraftModel  # the draft it drives

    def __init__(self, target, draft_model: EagleDraftModel, n_draft: int | None = None, tree=None):
        if not callable(getattr(target, "get_output_embeddings", None)):
            raise TypeError(f"target must be a transformers causal LM (e.g. pair.target), got {type(target).__name__}")
        kind = self.model_class.__name__
        if not isinstance(draft_model, self.model_class):
            raise TypeError(f"draft_model must be an {kind} ({kind}.from_pretrained(target)), got "
                            f"{type(draft_model).__name__}; a plain draft language model goes in DraftModelDrafter")
        if n_draft is not None and (not is_integer(n_draft) or n_draft < 1):
            raise ValueError(f"n_draft must be an integer >= 1, got {n_draft!r}")
        # a rank indexes the draft's scored vocabulary: past a reduced vocabulary's V_d it would pick a -inf logit
        ranks = draft_model.config.get("draft_vocab_size") or vocab_size(target)
        if tree is DynamicTree:
            raise TypeError("tree must be a DynamicTree instance, e.g. tree=DynamicTree() for SGLang's default shape, "
                            "or a list of rank paths; got the class DynamicTree itself")
        dynamic = tree if isinstance(tree, DynamicTree) else None
        if dynamic is not None and dynamic.topk > ranks:
            raise ValueError(f"tree.topk must be at most the draft's vocabulary ({ranks} tokens), got {dynamic.topk}")
        layout = None if tree is None or dynamic is not None else _tree_layout(tree, ranks)
        if tree is None:
            n_draft = 4 if n_draft is None else int(n_draft)
        else:
            depth = dynamic.num_steps if dynamic is not None else max(layout[2])
            if n_draft is not None and int(n_draft) != depth:
                raise ValueError(f"n_draft={n_draft!r} contradicts tree: in tree mode the tree's shape sets the draft "
                                 f"depth ({depth} levels for this tree); pass n_draft for a chain or tree for a "
                                 "tree, not both")
            n_draft = depth
        if draft_model.config["feature_size"] != target.config.hidden_size:
            raise ValueError(f"draft_model reads features of width {draft_model.config['feature_size']}, the "
                             f"target's are {target.config.hidden_size}")
        if draft_model.config["vocab_size"] != vocab_size(target):
            raise ValueError(f"draft_model drafts over a vocabulary of {draft_model.config['vocab_size']} tokens (its "
                             f"own target's LM head), this target's has {vocab_size(target)}: build it for this target")
        self.target = target
        self.model = draft_model.eval()
        self.n_draft = n_draft      # chain length, or the tree's depth in tree mode
        self.tree = None if tree is None else (dynamic or list(tree))  # a DynamicTree in dynamic tree mode
        self.last_candidates = None  # dynamic tree: every node the last proposal drafted, before reranking
        self._layout = layout
        self.vocab_size = vocab_size(target)
        self._cache = None
        self._true = 0              # cache positions holding true pairs
        self._pending_feats = []    # [D] tensors of true pairs not fed yet
        self._pending_tokens = []
        self._root = None           # predicted feature after the last fed true pair (the first draft's source)
        self._last = []             # the tokens of the last proposal (rows 1.. of the next TargetOutput)
        self._observed = None

    @classmethod
    def from_pretrained(cls, pair, n_draft: int | None = None, tree=None, directory=None) -> EagleDrafter:
        """An EAGLE drafter for ``pair.target`` (a :class:`lab.models.ModelPair`) with the weights in
        ``directory`` (default: the pair's committed draft, :data:`EAGLE_DIRS`; a pair without one raises
        ``FileNotFoundError``): a chain of ``n_draft`` tokens (default 4), or the token tree
        ``tree`` (then ``n_draft`` must be omitted or equal the tree's depth). Raises ``FileNotFoundError`` naming
        the path and ``python -m lab train eagle`` when they are missing, ``ValueError`` naming the folder when the
        weights were trained for another target than ``pair.target`` (:meth:`EagleDraftModel.from_pretrained`) and
        as the constructor does,
        ``TypeError`` when ``pair`` is not a ``ModelPair`` (a name or ``pair.target``, say)."""
        check_pair(pair, "EagleDrafter.from_pretrained")
        if directory is None:
            if pair.name not in EAGLE_DIRS:
                raise FileNotFoundError(f"no EAGLE draft for the {pair.name!r} pair: committed ones exist for "
                                        f"{', '.join(map(repr, EAGLE_DIRS))}; pass directory= for one of your own")
            directory = EAGLE_DIRS[pair.name]
        return cls(pair.target, EagleDraftModel.from_pretrained(pair.target, directory), n_draft=n_draft, tree=tree)

    def __repr__(self) -> str:
        return (f"EagleDrafter({self._mode()}, width={self.model.config['width']}, "
                f"trainable_parameters={trainable_parameters(self.model):,})")

    @property
    def dynamic(self) -> DynamicTree | None:
        """The :class:`DynamicTree` in dynamic tree mode, else None."""
        return self.tree if isinstance(self.tree, DynamicTree) else None

    def _mode(self) -> str:
        if self.dynamic is not None:
            return f"tree={self.dynamic}"
        return f"tree={len(self._layout[0])} nodes" if self.tree is not None else f"n_draft={self.n_draft}"

    # -- protocol -------------------------------------------------------------------------------------------
    def reset(self, prompt_ids, hidden=None) -> None:
        """Start a generation: ``hidden`` = the target's features ``[len(prompt_ids) - 1, D]`` for every token of
        ``prompt_ids`` but the last (the decode loop resets with the prompt and the prefill's first new token, and
        hands over the prefill's features over the whole prompt). Pending true pairs become (hidden[j],
        prompt_ids[j + 1]). Raises ``ValueError`` when ``hidden`` is missing or of the wrong shape or an id lies
        outside the target's vocabulary, ``TypeError`` for ids that are not integers or a ``hidden`` that is not a
        tensor."""
        prompt = check_token_ids("prompt_ids", prompt_ids, self.vocab_size)
        if hidden is not None and not isinstance(hidden, torch.Tensor):
            raise TypeError(f"hidden must be a tensor of the target's hidden states or None, got "
                            f"{type(hidden).__name__}")
        rows = len(prompt) - 1
        D = len(self.hidden_layers) * self.model.config["feature_size"]
        name = type(self).__name__
        if hidden is None:
            if rows:
                raise ValueError(f"{name} needs the target's hidden states: reset(prompt_ids, hidden=[L-1, {D}])")
            hidden = torch.zeros(0, D, device=next(self.model.parameters()).device)
        if tuple(hidden.shape) != (rows, D):
            raise ValueError(f"hidden must be [len(prompt_ids) - 1, {len(self.hidden_layers)} · D] = [{rows}, {D}], "
                             f"got {tuple(hidden.shape)}")
        self._cache = new_cache()
        self._true = 0
        self._pending_feats = list(self._true_features(hidden))
        self._pending_tokens = prompt[1:]
        self._root = None
        self._last = []
        self._observed = None

    @torch.inference_mode()
    def propose(self, request: DraftRequest) -> Draft:
        """Draft a chain of up to ``n_draft`` tokens (or the configured tree) from the target's last features and
        the draft's own predicted features (EAGLE, Li et al. 2024, §4). Raises ``RuntimeError`` before
        :meth:`reset`."""
        check_request(request)
        if self._cache is None:
            raise RuntimeError("call reset(prompt_ids, hidden=...) before propose()")
        self._last = []
        self._observed = None
        depth_cap = min(self.n_draft, request.max_tokens) if self.tree is None else request.max_tokens
        if depth_cap <= 0 or (not self._pending_tokens and self._root is None):
            return Draft()  # nothing to draft, or no pair yet (one-token prompt): a plain target step
        calls = 0
        if self._pending_tokens:  # the true pairs learnt since the last step, in one forward
            feats = torch.stack(self._pending_feats)
            k = len(self._pending_tokens)
            positions = torch.arange(self._true + 1, self._true + 1 + k)
            pred = self.model(feats, self._pending_tokens, self._cache, position_ids=positions)
            calls += 1
            self._root = pred[-1]
            self._true += k
            self._pending_feats, self._pending_tokens = [], []
        if self.tree is None:
            draft = self._chain(depth_cap, request, calls)
        elif self.dynamic is not None:
            draft = self._dynamic_tree(depth_cap, calls)
        else:
            draft = self._tree(depth_cap, calls)
        rollback(self._cache, self._true)  # the cache keeps true pairs only
        self._last = list(draft.tokens)
        return draft

    def _chain(self, n: int, request: DraftRequest, calls: int) -> Draft:
        greedy = request.temperature == 0
        feat, tokens, rows = self._root, [], []
        for i in range(n):
            token, probs = draft_token(self.model.logits(feat), request)
            if probs is not None:
                rows.append(probs)
            tokens.append(token)
            if i < n - 1:  # the pair (predicted feature, drafted token) at the drafted token's position
                feat = self.model(feat[None], [token], self._cache,
                                  position_ids=[self._true + 1 + i])[-1]
                calls += 1
        return Draft(tokens, None if greedy else torch.stack(rows), calls)

    def _tree(self, max_depth: int, calls: int) -> Draft:
        paths, parents, depths = self._layout
        keep = [i for i, d in enumerate(depths) if d <= max_depth]  # a prefix: paths are sorted by depth
        paths, parents, depths = paths[:len(keep)], parents[:len(keep)], depths[:len(keep)]
        tokens = [0] * len(paths)
        out_feat = {-1: self._root}  # node -> its predicted next feature
        fed = []                     # nodes in the cache after the true pairs, in cache order
        for depth in range(1, max(depths) + 1):
            level = [i for i, d in enumerate(depths) if d == depth]
            # Each node takes the rank-th token of its parent's distribution: one LM-head call for the level's
            # parents, one top-k each (as deep as the deepest rank a child asks for).
            level_parents = list(dict.fromkeys(parents[i] for i in level))
            deepest = max(paths[i][-1] for i in level) + 1
            top = torch.topk(self.model.logits(torch.stack([out_feat[p] for p in level_parents])), deepest).indices
            row = {p: r for r, p in enumerate(level_parents)}
            for i in level:
                tokens[i] = int(top[row[parents[i]], paths[i][-1]])
            if depth == max(depths):
                break
            # Feed this level; the nodes fed so far are a prefix of the (depth-sorted) tree, so lab.trees gives
            # the mask: each node sees the true pairs, its ancestors (cached by earlier levels) and itself.
            upto = len(fed) + len(level)
            allow = tree_attention_mask(parents[:upto], self._true)[len(fed):]
            # lab.trees counts positions from the committed tokens; pair positions are one further (x_{j+1}).
            positions = tree_position_ids(parents[:upto], self._true + 1)[len(fed):]
            feats = torch.stack([out_feat[parents[i]] for i in level])
            pred = self.model(feats, [tokens[i] for i in level], self._cache, position_ids=positions,
                              attention_mask=allow)
            calls += 1
            for r, i in enumerate(level):
                out_feat[i] = pred[r]
            fed += level
        return Draft(tokens, None, calls, parents=list(parents))

    def _dynamic_tree(self, max_depth: int, calls: int) -> Draft:
        spec = self.dynamic
        ids, scores = top_children(torch.softmax(self.model.logits(self._root).float(), -1)[None], spec.topk)
        tokens, values, parents = ids[0].tolist(), [scores[0]], [-1] * spec.topk  # every node drafted
        frontier, frontier_scores = list(range(spec.topk)), scores[0]             # the level's expanded nodes
        out_feat = {-1: self._root}   # node -> its predicted next feature
        slot, fed_parents = {}, []    # node -> row among the fed nodes; the fed nodes' parents array (those rows)
        for _ in range(1, min(spec.num_steps, max_depth)):
            # Feed the expanded nodes; the mask lets each see the true pairs, its ancestors and itself.
            rows = fed_parents + [slot.get(parents[c], -1) for c in frontier]
            allow = tree_attention_mask(rows, self._true)[len(fed_parents):]
            positions = tree_position_ids(rows, self._true + 1)[len(fed_parents):]
            pred = self.model(torch.stack([out_feat[parents[c]] for c in frontier]), [tokens[c] for c in frontier],
                              self._cache, position_ids=positions, attention_mask=allow)
            calls += 1
            for r, c in enumerate(frontier):
                out_feat[c], slot[c] = pred[r], len(fed_parents) + r
            fed_parents = rows
            level = expand_level(frontier_scores, torch.softmax(self.model.logits(pred).float(), -1), spec.topk)
            first = len(tokens)
            tokens += level["tokens"].tolist()
            values.append(level["scores"])
            parents += [frontier[r] for r in level["rows"].tolist()]
            frontier = [first + c for c in level["chosen"].tolist()]
            frontier_scores = level["scores"][level["chosen"]]
        scores = torch.cat(values)
        self.last_candidates = {"tokens": tokens, "values": scores, "parents": parents}
        keep = rerank(scores, parents, min(spec.drafted, len(tokens)))
        row = {c: i for i, c in enumerate(keep)}
        return Draft([tokens[c] for c in keep], None, calls, parents=[row.get(parents[c], -1) for c in keep])

    def observe(self, output: TargetOutput) -> None:
        """Keep the target's features of the committed rows (``output.hidden[output.path]``); the pairs they form
        are completed by ``update``'s ``next_token``. Raises ``ValueError`` without hidden states, or for a path that
        does not start at row 0, names a row that was not drafted, or (for a chain) skips a row."""
        if output.hidden is None:
            raise ValueError("EagleDrafter needs TargetOutput.hidden (it sets needs_hidden_states = True)")
        path = [int(r) for r in output.path]
        if (not path or path[0] != 0 or any(r - 1 >= len(self._last) for r in path[1:])
                or max(path) >= len(output.hidden)):
            raise ValueError(f"output.path must start at row 0 and name drafted rows of output.hidden, got {path}")
        if self.tree is None and path != list(range(len(path))):  # a chain is accepted as a prefix
            raise ValueError(f"output.path of a chain must be consecutive rows 0, 1, ..., got {path}")
        self._observed = (self._true_features(output.hidden[path]), [self._last[r - 1] for r in path[1:]])

    @torch.inference_mode()
    def _true_features(self, hidden: torch.Tensor) -> torch.Tensor:
        """What a true pair feeds the draft for the target's hidden states ``hidden`` ``[rows, D]``: EAGLE feeds the
        features as they are (in the draft's dtype); EAGLE-3 fuses its layers first."""
        return hidden.detach().to(self.model.fusion.weight.dtype)

    def update(self, num_accepted: int, next_token: int) -> None:
        """Queue the new true pairs (f of each committed row, the token after it) and keep the cache at the true
        pairs. Raises ``RuntimeError`` if ``observe`` did not hand over this step's hidden states."""
        if self._observed is None:
            raise RuntimeError("EagleDrafter.update needs this step's target hidden states: the decode loop must "
                               "call observe(TargetOutput) with hidden states (needs_hidden_states) before update")
        feats, accepted = self._observed
        if len(accepted) != num_accepted:
            raise ValueError(f"num_accepted ({num_accepted}) disagrees with the observed path "
                             f"({len(accepted)} accepted rows)")
        rollback(self._cache, self._true)
        self._pending_feats += list(feats)
        self._pending_tokens += accepted + [check_int("next_token", next_token, 0, self.vocab_size - 1)]
        self._root = None  # stale: the next proposal starts from the newest true pair
        self._observed = None
        self._last = []

    def cached_pairs(self) -> int:
        """Positions in the draft layer's KV cache (0 before ``reset``): the true (feature, next token) pairs.

        Deliberately not ``kv_length()``, which :func:`lab.decode.generate` records for the KV-cache viewer as one
        slot per committed token: slot i here holds the pair (f_i, x_{i+1}), and the drafted pairs are rolled back
        inside ``propose``, so a viewer row would label every slot one token early and never show the drafts."""
        return 0 if self._cache is None else cache_length(self._cache)
