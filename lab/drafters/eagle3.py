"""EAGLE-3: a one-layer draft that reads a fusion of low, middle and high target layers and predicts tokens.

Source: Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large Language Models via Training-Time
Test" (arXiv 2503.01840), §3. What changes from EAGLE (:mod:`lab.drafters.eagle`, Li et al. 2024):

- **Fused features.** The draft reads the target's hidden states of three layers, a low, a middle and a high one,
  concatenated (``[.., 3D]``) and projected by one linear layer ``fc`` to the draft's width: g_j = fc([l_j; m_j; h_j])
  (§3.2). The decode loop hands them over because the drafter declares ``hidden_layers``
  (:func:`lab.models.layer_states`).
- **Tokens, not features.** The draft's output a_{j+1} goes through its *own* head over a reduced draft vocabulary
  and is trained with cross-entropy only; nothing regresses it onto the target's next feature (§3.1).
- **Training-time test.** At drafting step 1 the input is (embedding of x_{j+1}, g_j); at steps ≥ 2 the draft's own
  output a replaces g. Training unrolls the same chain on the draft's own outputs (§3.2;
  :func:`lab.training.eagle.eagle_chain_predictions`), so step k > 1 sees at training what it sees at inference.
- **Reduced draft vocabulary with a d2t map.** The head scores ``V_d`` ids; draft id j is target id
  ``j + d2t[j]`` (the official checkpoints store ``d2t``; :mod:`lab.drafters.draft_vocab`). Every other token has
  draft probability 0, so rejection sampling stays exact: those tokens come only from the target's residual or
  bonus draw.

Layers here (the convention of :func:`lab.models.layer_states`: index i = output of decoder layer i, the last one
after the final norm). The official EAGLE-3 code captures the inputs of decoder layers 2, N/2 and N - 3 of an
N-layer target, i.e. indices (2, N // 2, N - 3); on the 6-layer Shakespeare target N // 2 = N - 3 = 3, so this
course takes (2, N // 2, N): the high layer is the target's last, the input of its LM head (:func:`default_layers`).

Departures, on purpose (small targets, CPU training): the draft works at a bottleneck width (160) like this
course's EAGLE draft, and the state passed from one step to the next is the layer's output after its final norm
(the vector the head reads) rather than the pre-norm state. With ``config["head"] = "target"`` (the real pair's
draft, under its size budget) the head is the target's own frozen LM-head rows of the draft vocabulary, as this
course's EAGLE draft uses them, instead of a trained head: the draft then works at the target's width and saves
``d · V_d`` parameters (4.7 M at 576 × 8,192).

The drafter (:class:`Eagle3Drafter`) is :class:`lab.drafters.eagle.EagleDrafter` with a different model and
features: the draft's KV cache keeps the true pairs (g_j, x_{j+1}) only, and the drafted rows are rolled back
before ``propose`` returns. Training: :mod:`lab.training.eagle3` (``python -m lab train eagle3``) and
:mod:`lab.training.chat_eagle3` (``train chat-eagle3``, the real pair); committed weights per pair in
:data:`EAGLE3_DIRS`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import torch

from lab.assets import PAIR_DIR, SMOLLM2_DIR, TARGET_KEY, check_model_type, check_target_key, target_weights_key
from lab.drafters.base import check_pair
from lab.drafters.draft_vocab import check_draft_vocab
from lab.drafters.eagle import (EagleDrafter, check_step_inputs, draft_layer, draft_layer_config, full_vocab_logits,
                                run_draft_layer, trainable_parameters)
from lab.models import cache_kwarg, vocab_size
from lab.validation import is_integer

__all__ = ["EAGLE3_DIRS", "Eagle3DraftModel", "Eagle3Drafter", "default_layers", "eagle3_card"]

EAGLE3_DIRS = {"shakespeare": PAIR_DIR / "eagle3", "smollm2-135m": SMOLLM2_DIR / "eagle3"}
"""The committed EAGLE-3 drafts, by pair name (``python -m lab train eagle3`` / ``train chat-eagle3``)."""


def eagle3_card(pair_name: str) -> dict:
    """The measurements committed with ``pair_name``'s EAGLE-3 draft (``training.json`` and ``measurements.json``
    in :data:`EAGLE3_DIRS`), beside the committed EAGLE draft's, in one shape whichever recipe wrote them
    (``python -m lab train eagle3`` for the Shakespeare pair, ``train chat-eagle3`` for the real pair):

    - ``steps``, ``batch``: EAGLE-3's training steps (a continued draft's counted over its runs, ``continued_from``)
      and sequences per step; ``eagle_steps``: the EAGLE draft's, counted the same way;
    - ``data``: what both were trained on; ``held_out``: what the agreement was scored on (both str);
    - ``agreement``: EAGLE-3's held-out teacher-forced agreement with the target's greedy token at drafting steps
      1, 2, 3 (floats); ``eagle_agreement``: the EAGLE draft's at step 1 on the same tokens;
    - ``decoding``: the card's greedy decoding rows by method (``"eagle N=3"``, ``"eagle3 N=3"``, ...: ``alpha``,
      ``tokens_per_target_call``, ``speedup``, ...); ``settings``: that run's settings (``prompts``,
      ``max_new_tokens``, ``dtype``, ``device``, ``threads``, ...); ``date``: when it ran (str, UTC; None where the
      card does not say).

    Raises ``ValueError`` for a pair without a committed EAGLE-3 draft."""
    from lab.drafters.eagle import EAGLE_DIRS

    if pair_name not in EAGLE3_DIRS:
        raise ValueError(f"pair_name must be one of {sorted(EAGLE3_DIRS)} (the pairs with a committed EAGLE-3 "
                         f"draft), got {pair_name!r}")
    directory = EAGLE3_DIRS[pair_name]
    train = json.loads((directory / "training.json").read_text())
    measured = json.loads((directory / "measurements.json").read_text())
    eagle = json.loads((EAGLE_DIRS[pair_name] / "training.json").read_text())
    per_step = train["held_out_agreement"]
    if isinstance(per_step["step_1"], dict):  # the chat recipe scores each kind of request, and all of them
        agreement = [per_step[f"step_{k}"]["all"] for k in (1, 2, 3)]
        eagle_agreement = train["eagle_on_the_same_held_out"]["agreement"]["all"]
        data = "the same chat data"
        if train.get("continued_from"):
            data += (f" (the last {train['recipe']['steps']:,} steps of each continuing the first run on data rebuilt "
                     "later)")
        held_out = f"its {train['data']['held_out_sequences']} held-out sequences"
    else:  # the Shakespeare recipe: both drafts scored on the same held-out corpus windows (measurements.json)
        agreement = list(measured["teacher_forced_agreement"]["eagle3"])
        eagle_agreement = measured["teacher_forced_agreement"]["eagle"][0]
        data = "the same corpus"
        held_out = "64 held-out windows of 256 tokens"
    return {"steps": _all_steps(train), "batch": train["recipe"]["batch"], "eagle_steps": _all_steps(eagle),
            "data": data, "held_out": held_out, "agreement": agreement, "eagle_agreement": eagle_agreement,
            "decoding": {row["method"]: row for row in measured["decoding"]["rows"]},
            "settings": measured["decoding"]["settings"], "date": measured["decoding"].get("date")}


def _all_steps(info: dict) -> int:
    """A ``training.json``'s steps, with those of the runs it continued (``continued_from``, nested)."""
    steps = info["recipe"]["steps"] if "recipe" in info else info["steps"]
    return steps + (_all_steps(info["continued_from"]) if info.get("continued_from") else 0)


def default_layers(num_layers: int) -> tuple:
    """The low, middle and high target layers an EAGLE-3 draft reads for a target of ``num_layers`` decoder layers,
    as :func:`lab.models.layer_states` indices: ``(2, N // 2, N)`` from 6 layers up (see the module docstring),
    e.g. (2, 3, 6) for the Shakespeare target, (2, 15, 30) for SmolLM2-135M; below 6 the low index is
    ``N // 2 - 1`` so that the three stay distinct: (1, 2, 5), (1, 2, 4), and (0, 1, 3) for 3 layers, where index 0
    is the embeddings' output, not a decoder layer's. Raises ``ValueError`` below 3 layers."""
    if num_layers < 3:
        raise ValueError(f"num_layers must be at least 3 for a low, a middle and a high layer, got {num_layers}")
    return (min(2, num_layers // 2 - 1) if num_layers < 6 else 2, num_layers // 2, num_layers)


class Eagle3DraftModel(torch.nn.Module):
    """The EAGLE-3 draft of a target LM (Li et al. 2025, §3).

    - ``fuse(hidden)``: ``fc`` (Linear ``k·D -> d``, no bias) on the target's hidden states of ``k`` layers
      concatenated, ``[..., k·D]`` -> g ``[..., d]``.
    - ``forward(g, tokens)``: ``fusion`` (Linear ``D + d -> d``) on [embedding of x_{j+1}; g_j], one Llama decoder
      layer with its final norm (:func:`lab.drafters.eagle.draft_layer`, its own KV cache) -> a_{j+1} ``[..., d]``.
      At drafting steps ≥ 2, a from the step before is passed as g.
    - ``head_logits(a)``: the draft's own head (Linear ``d -> V_d``, no bias) over the draft vocabulary, or with
      ``config["head"] = "target"`` the target's frozen LM-head rows of those ids (derived, never saved; ``width``
      must then be the target's); ``logits(a)`` spreads them over the target's vocabulary with ``-inf`` elsewhere.

    The target's input embedding is shared and frozen (a plain attribute: not a parameter, never saved).
    Arguments: ``target`` (a transformers causal LM), ``config`` (``width``, ``heads``, ``kv_heads``,
    ``intermediate``, ``head`` "own" or "target"; :attr:`DEFAULTS`), ``draft_vocab`` (LongTensor ``[V_d]`` of
    distinct target ids, most frequent first; None = the whole vocabulary) and ``hidden_layers`` (the target layers
    read; default :func:`default_layers`). The draft is built in float32 on the target's device. Raises
    ``ValueError`` naming the argument for a malformed config, draft
    vocabulary or layer list, or a ``head`` other than "own" / "target" (or "target" at a width other than the
    target's).
    """

    DEFAULTS: ClassVar[dict] = {"width": 160, "heads": 5, "kv_heads": 5, "intermediate": 384, "head": "own"}

    def __init__(self, target, config: dict | None = None, draft_vocab=None, hidden_layers=None):
        super().__init__()
        self.config = draft_layer_config(target, dict(self.DEFAULTS, **(config or {})))
        states = int(target.config.num_hidden_layers) + 1
        layers = default_layers(states - 1) if hidden_layers is None else tuple(hidden_layers)
        if not layers or any(not is_integer(i) or not -states <= i < states for i in layers):
            raise ValueError(f"hidden_layers must be indices into the target's {states} hidden states, got {layers}")
        V = self.config["vocab_size"]
        ids = torch.arange(V) if draft_vocab is None else check_draft_vocab(draft_vocab, V)
        layers = tuple(int(i) for i in layers)
        self.config.update(hidden_layers=list(layers), draft_vocab_size=int(ids.numel()))
        D, width = self.config["feature_size"], self.config["width"]
        object.__setattr__(self, "target", target)  # shared and frozen: not a submodule
        self.fc = torch.nn.Linear(len(layers) * D, width, bias=False)
        self.fusion = torch.nn.Linear(D + width, width)
        self.layer = draft_layer(self.config)
        if self.config["head"] not in ("own", "target"):
            raise ValueError(f"config['head'] must be 'own' or 'target', got {self.config['head']!r}")
        if self.config["head"] == "own":
            self.head = torch.nn.Linear(width, int(ids.numel()), bias=False)
        else:
            if width != D:
                raise ValueError(f"config['width'] must be the target's width ({D}) with config['head'] = 'target', "
                                 f"got {width}")
            self.head = None
            lm_head = target.get_output_embeddings()
            # the target's LM-head rows of the draft vocabulary: derived, frozen, never saved
            self.register_buffer("head_rows", lm_head.weight.detach()[ids].float().clone(), persistent=False)
            bias = getattr(lm_head, "bias", None)
            self.register_buffer("head_bias", None if bias is None else bias.detach()[ids].float().clone(),
                                 persistent=False)
        # EAGLE-3's d2t: target id = draft id + d2t[draft id]; saved with the weights
        self.register_buffer("d2t", ids - torch.arange(ids.numel(), device=ids.device))
        self._cache_kwarg = cache_kwarg(type(self.layer))
        self.to(target.get_input_embeddings().weight.device)  # the target's: a split model fails at its first forward

    @property
    def draft_vocab(self) -> torch.Tensor:
        """The target ids of the draft vocabulary, LongTensor ``[V_d]`` (``arange(V_d) + d2t``)."""
        return torch.arange(self.d2t.numel(), device=self.d2t.device) + self.d2t

    def fuse(self, hidden: torch.Tensor) -> torch.Tensor:
        """g = fc(hidden): the target's ``k`` layers ``[..., k·D]`` (any float dtype, any device) -> ``[..., d]`` in
        the model's dtype, on its device. Raises ``ValueError`` for another width."""
        if hidden.size(-1) != self.fc.in_features:
            raise ValueError(f"hidden must be the target's {len(self.config['hidden_layers'])} layers concatenated, "
                             f"width {self.fc.in_features}, got width {hidden.size(-1)}")
        return self.fc(hidden.to(self.fc.weight.device, self.fc.weight.dtype))

    def forward(self, features: torch.Tensor, tokens: torch.Tensor, cache=None, position_ids=None,
                attention_mask=None) -> torch.Tensor:
        """One draft step for every row: ``features`` g_j or a_j ``[B, n, d]`` (or ``[n, d]``), ``tokens``
        x_{j+1} LongTensor ``[B, n]`` (or ``[n]``) -> a_{j+1} ``[B, n, d]`` (``[n, d]``) in the model's dtype.
        ``cache``, ``position_ids`` (the pair sits at the position of x_{j+1}) and ``attention_mask`` as in
        :meth:`lab.drafters.eagle.EagleDraftModel.forward`. Raises ``ValueError`` for mismatched shapes."""
        width = self.config["width"]
        features, tokens, unbatched = check_step_inputs(
            features, tokens, width, f"fused target states or the draft's own outputs, width {width}", letter="d",
            hint=" (fuse() the target's first)", device=self.fusion.weight.device)
        dtype = self.fusion.weight.dtype
        embedded = self.target.get_input_embeddings()(tokens).to(dtype)
        x = self.fusion(torch.cat([embedded, features.to(dtype)], dim=-1))
        out = run_draft_layer(self.layer, self._cache_kwarg, x, cache, position_ids, attention_mask)
        return out[0] if unbatched else out

    def head_logits(self, features: torch.Tensor) -> torch.Tensor:
        """The draft's head (its own, or the target's rows): ``[..., d]`` (any float dtype, any device) -> float32
        logits ``[..., V_d]`` over the draft vocabulary, on the model's device."""
        if self.head is None:
            return torch.nn.functional.linear(features.to(self.head_rows.device, self.head_rows.dtype),
                                              self.head_rows, self.head_bias).float()
        return self.head(features.to(self.head.weight.device, self.head.weight.dtype)).float()

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``[..., V]`` over the target's vocabulary: the head's at the draft vocabulary's ids,
        ``-inf`` (probability 0) elsewhere."""
        return full_vocab_logits(self.head_logits(features), self.draft_vocab, self.config["vocab_size"])

    # -- files ----------------------------------------------------------------------------------------------
    def save_pretrained(self, directory) -> Path:
        """Write ``model.safetensors`` (float16 weights, the int64 ``d2t``) and ``config.json`` (with the target's
        :func:`lab.assets.target_weights_key`) to ``directory``; returns it."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to("cpu", torch.float16 if v.is_floating_point() else v.dtype).contiguous()
                 for k, v in self.state_dict().items() if not k.startswith("layer.embed_tokens")}
        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
        config = {"model_type": "lab-eagle3", **self.config, TARGET_KEY: target_weights_key(self.target)}
        (directory / "config.json").write_text(json.dumps(config, indent=1))
        return directory

    @classmethod
    def from_pretrained(cls, target, directory) -> Eagle3DraftModel:
        """Load a draft saved by :meth:`save_pretrained` for ``target`` (safetensors only), in the target's dtype and
        on its device, in eval mode. Raises ``FileNotFoundError`` naming the folder and ``python -m lab train
        eagle3`` when the files are missing, ``ValueError`` when the folder holds another kind of draft
        (:func:`lab.assets.check_model_type`), when they were made for another target (width, vocabulary, or
        :func:`lab.assets.target_weights_key`) or do not match the architecture."""
        from safetensors.torch import load_file

        directory = Path(directory)
        weights, config_path = directory / "model.safetensors", directory / "config.json"
        if not weights.is_file() or not config_path.is_file():
            raise FileNotFoundError(f"no EAGLE-3 draft weights at {directory} (model.safetensors + config.json); "
                                    "train them with `python -m lab train eagle3` (shakespeare) or `python -m lab "
                                    "train chat-eagle3` (smollm2-135m), or restore lab/assets from git")
        config = json.loads(config_path.read_text())
        check_model_type(config, "lab-eagle3", directory)
        for key, mine in (("feature_size", int(target.config.hidden_size)), ("vocab_size", vocab_size(target))):
            if config.get(key) != mine:
                raise ValueError(f"the EAGLE-3 draft in {directory} was trained for {key} {config.get(key)}, this "
                                 f"target has {mine}")
        check_target_key(config, target, directory, "an EAGLE-3 draft",
                         "python -m lab train eagle3` or `python -m lab train chat-eagle3")  # shakespeare, smollm2
        state = load_file(str(weights))
        d2t = state.get("d2t")
        if d2t is None:
            raise ValueError(f"{weights} holds no d2t table")
        draft_vocab = torch.arange(d2t.numel()) + d2t
        model = cls(target, {k: config[k] for k in cls.DEFAULTS if k in config}, draft_vocab=draft_vocab,
                    hidden_layers=config.get("hidden_layers"))
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.startswith("layer.embed_tokens")]
        if missing or unexpected:
            raise ValueError(f"{weights} does not match the EAGLE-3 draft: missing {missing}, unexpected {unexpected}")
        param = next(target.parameters())
        return model.to(device=param.device, dtype=param.dtype).eval()


class Eagle3Drafter(EagleDrafter):
    """Drafter protocol around an :class:`Eagle3DraftModel` (Li et al. 2025, §3): :class:`EagleDrafter`'s chain
    (``n_draft`` tokens, default 4) or tree, KV cache of true pairs and rollback, fed fused target layers.

    ``hidden_layers`` (the model's) tells the decode loop which target layers to hand over: ``reset(prompt_ids,
    hidden=[len(prompt_ids) - 1, k·D])`` and ``TargetOutput.hidden`` ``[rows, k·D]`` float32. At T > 0 the draft
    probabilities ``[n, V]`` are 0 outside the draft vocabulary. Raises as :class:`EagleDrafter` does
    (``TypeError`` when ``draft_model`` is not an :class:`Eagle3DraftModel`)."""

    model_class: ClassVar[type] = Eagle3DraftModel

    def __init__(self, target, draft_model: Eagle3DraftModel, n_draft: int | None = None, tree=None):
        super().__init__(target, draft_model, n_draft=n_draft, tree=tree)
        self.hidden_layers = tuple(draft_model.config["hidden_layers"])

    @classmethod
    def from_pretrained(cls, pair, n_draft: int | None = None, tree=None, directory=None) -> Eagle3Drafter:
        """An EAGLE-3 drafter for ``pair.target`` with the weights in ``directory`` (default: the pair's committed
        draft, :data:`EAGLE3_DIRS`). Raises ``FileNotFoundError`` for a pair without one (naming the pairs that have
        one) or missing files, ``ValueError`` for weights of another target and as the constructor does,
        ``TypeError`` when ``pair`` is not a ``ModelPair``."""
        check_pair(pair, "Eagle3Drafter.from_pretrained")
        if directory is None:
            if pair.name not in EAGLE3_DIRS:
                raise FileNotFoundError(f"no EAGLE-3 draft for the {pair.name!r} pair: committed ones exist for "
                                        f"{', '.join(map(repr, EAGLE3_DIRS))}; pass directory= for one of your own")
            directory = EAGLE3_DIRS[pair.name]
        return cls(pair.target, Eagle3DraftModel.from_pretrained(pair.target, directory), n_draft=n_draft, tree=tree)

    def __repr__(self) -> str:
        return (f"Eagle3Drafter({self._mode()}, layers={self.hidden_layers}, width={self.model.config['width']}, "
                f"draft_vocab={self.model.config['draft_vocab_size']}, "
                f"trainable_parameters={trainable_parameters(self.model):,})")

    @torch.inference_mode()
    def _true_features(self, hidden: torch.Tensor) -> torch.Tensor:
        """g = fc(the target's fused layers) for each row of ``hidden`` ``[rows, k·D]``."""
        return self.model.fuse(hidden.detach())
