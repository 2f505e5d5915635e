"""Medusa: extra decoding heads on the target's own last hidden state propose a token tree (lesson 10).

Source: Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads",
§2.1.1 (Medusa heads, Medusa-1: a frozen backbone) and §2.1.2 (tree attention over the heads' top choices,
the "medusa_choices").

The target's LM head turns the feature ``f_t`` (its last hidden state at token ``x_t``, after the final norm) into
a prediction of ``x_{t+1}``. Medusa head k (k = 1..K) reads the same feature and predicts ``x_{t+1+k}``: one
residual block ``x + SiLU(W_k x + b_k)`` and its own output layer. No draft model, no draft KV cache: one cheap
heads evaluation per step, then the target verifies a whole tree of candidate continuations in one forward.

Weights are stored as float16 safetensors plus ``config.json`` in ``lab/assets/shakespeare/medusa/``; train them
with ``python -m lab train medusa`` (:func:`lab.training.medusa.train_medusa`).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from lab.assets import MEDUSA_DIR, SMOLLM2_DIR, check_model_type
from lab.drafters.base import Draft, DraftRequest, TargetOutput, check_pair, check_request
from lab.drafters.draft_vocab import check_draft_vocab
from lab.trees import check_choices
from lab.validation import check_int, check_token_ids

__all__ = ["DEFAULT_TREE", "MEDUSA_DIR", "MEDUSA_DIRS", "MedusaDrafter", "MedusaHeads", "head_accuracy",
           "medusa_tree"]

MEDUSA_DIRS = {"shakespeare": MEDUSA_DIR, "smollm2-135m": SMOLLM2_DIR / "medusa"}
"""The committed Medusa heads, by pair name (``python -m lab train medusa`` / ``train chat-medusa``)."""

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"

# The choice set ("medusa_choices"): path (i, j, l) = head 1's i-th best token, then head 2's j-th best, then
# head 3's l-th best (0 = the argmax). Every path's prefix is itself a path (a node needs its parent). Chosen as
# Cai et al. 2024 §2.3.3 suggest: measure how often head k's rank-r token is right on the target's greedy
# continuations of 12 training-split windows, score a path by the product of its ranks' accuracies (its expected
# acceptance), keep the 14 best. For the first, corpus-trained heads (head 1 rank 0-3: 43%, 10%, 5%, 5%; head 2
# rank 0: 28%; head 3 rank 0: 21%) that gave this tree, wide at depth 1 and thin below: 8 + 5 + 1 nodes. The
# committed self-distilled heads are surer further out (head 1: 63%, 16%, 6%; head 2: 50%, 18%; head 3: 37%, 20%)
# and the same rule picks a 4 + 5 + 5 tree, 2.59 tokens per target call on those windows against 2.54 for this one;
# but on the arena's prompts (3 per task, 64 tokens) it gave no more at T = 0 (2.82-3.15 against 2.91-3.25) and
# fewer at T = 1 (1.20-1.29 against 1.30-1.37), where a wide first level catches more sampled tokens. So this stays.
DEFAULT_TREE: list[tuple[int, ...]] = [
    (0,), (1,), (2,), (3,), (4,), (5,), (6,), (7,),
    (0, 0), (0, 1), (0, 2), (0, 3), (1, 0),
    (0, 0, 0),
]


def _check_choices(choices, num_heads: int | None = None, vocab: int | None = None,
                   name: str = "choices") -> list[tuple[int, ...]]:
    """:func:`lab.trees.check_choices` with a depth of at most ``num_heads`` and ranks below ``vocab``."""
    return check_choices(choices, max_depth=num_heads, max_rank=vocab, name=name)


def medusa_tree(head_topk_tokens, choices=DEFAULT_TREE, max_depth: int | None = None) -> tuple[list, list]:
    """Build a Medusa token tree from each head's top choices (Cai et al. 2024, §2.1.2).

    ``head_topk_tokens``: LongTensor ``[num_heads, k]`` (or nested lists): row d holds head d+1's candidate
    token ids, best first. ``choices``: paths of ranks, see :data:`DEFAULT_TREE`. ``max_depth``: drop paths
    longer than this (None keeps all; <= 0 gives an empty tree).

    Returns ``(tokens, parents)``: one node per kept path, in breadth-first order (by depth, then by ranks), so
    every parent comes before its children; ``parents[i]`` is the index of node i's parent or -1 for a depth-1
    node (a child of the last committed token). This is :class:`lab.drafters.base.Draft`'s tree layout.

    Raises ``ValueError`` for an invalid choice set (see :func:`_check_choices`), or when a path uses a head or
    rank that ``head_topk_tokens`` does not have; ``TypeError`` when ``head_topk_tokens`` is not integer token ids
    (the heads' logits or probabilities instead of ``logits.topk(k, dim=-1).indices``).
    """
    top = torch.as_tensor(head_topk_tokens)
    if top.numel() and (top.is_floating_point() or top.is_complex() or top.dtype == torch.bool):  # [] is float32
        raise TypeError(f"head_topk_tokens must be integer token ids [num_heads, k] (e.g. "
                        f"head_logits.topk(k, dim=-1).indices), got dtype {top.dtype}: the heads' logits or "
                        "probabilities are not token ids")
    if top.dim() != 2:
        raise ValueError(f"head_topk_tokens must be [num_heads, k], got shape {tuple(top.shape)}")
    paths = _check_choices(choices)
    if max_depth is not None:
        paths = [p for p in paths if len(p) <= max_depth]
    index: dict[tuple, int] = {}
    tokens, parents = [], []
    for path in paths:
        depth = len(path)
        if depth > top.size(0) or path[-1] >= top.size(1):
            raise ValueError(f"choices: path {path} needs head {depth}'s rank {path[-1]}, but head_topk_tokens "
                             f"has {top.size(0)} heads x {top.size(1)} candidates")
        index[path] = len(tokens)
        tokens.append(int(top[depth - 1, path[-1]]))
        parents.append(index[path[:-1]] if depth > 1 else -1)
    return tokens, parents


class _ResBlock(torch.nn.Module):
    """``x + SiLU(Linear(x))`` with the Linear zero-initialised: the block starts as the identity (Medusa-1)."""

    def __init__(self, size: int):
        super().__init__()
        self.linear = torch.nn.Linear(size, size)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, x):
        return x + F.silu(self.linear(x))


class MedusaHeads(torch.nn.Module):
    """``num_heads`` Medusa-1 heads over a ``hidden_size`` feature and a ``vocab_size`` vocabulary (the target's).

    Head k = ``Linear(D, V, bias=False)(x + SiLU(Linear(D, D)(x)))`` (Cai et al. 2024, §2.1.1). With the block's
    Linear at zero and the output layer copied from the target's LM head (:meth:`from_target`), every head starts
    as exactly the target's next-token predictor; training moves head k to the token k positions further on.

    ``draft_vocab`` (LongTensor ``[V_d]`` of target ids, :mod:`lab.drafters.draft_vocab`) gives each head an output
    layer over those tokens only (``Linear(D, V_d)``): with a 49k-token vocabulary, three full output layers would
    hold most of the size of the target's own layers. Head outputs are then indices into ``draft_vocab``;
    :meth:`to_target` maps them to target ids. ``shared_head=True`` gives all heads one trainable output layer
    (``lm_heads`` then holds one Linear) after their own residual blocks: vLLM's Medusa checkpoints can do the same
    (``MedusaConfig.original_lm_head``, vllm/transformers_utils/configs/medusa.py). Raises ``ValueError`` for
    ``num_heads`` < 1, a non-positive size or a malformed ``draft_vocab``.
    """

    def __init__(self, hidden_size: int, vocab_size: int, num_heads: int = 3, draft_vocab=None,
                 shared_head: bool = False):
        super().__init__()
        num_heads, hidden_size, vocab_size = (check_int(name, value, 1) for name, value in (
            ("num_heads", num_heads), ("hidden_size", hidden_size), ("vocab_size", vocab_size)))
        self.hidden_size, self.vocab_size, self.num_heads = hidden_size, vocab_size, num_heads
        self.draft_vocab_size = None
        if draft_vocab is not None:
            ids = check_draft_vocab(draft_vocab, vocab_size)
            self.draft_vocab_size = int(ids.numel())
            self.register_buffer("draft_vocab", ids)  # saved with the weights: head index -> target id
        out = self.draft_vocab_size or vocab_size
        self.blocks = torch.nn.ModuleList(_ResBlock(hidden_size) for _ in range(num_heads))
        self.shared_head = bool(shared_head)
        self.lm_heads = torch.nn.ModuleList(torch.nn.Linear(hidden_size, out, bias=False)
                                            for _ in range(1 if self.shared_head else num_heads))

    @property
    def output_size(self) -> int:
        """How many tokens each head scores: ``V_d`` with a draft vocabulary, else ``vocab_size``."""
        return self.draft_vocab_size or self.vocab_size

    def to_target(self, indices: torch.Tensor) -> torch.Tensor:
        """Head output indices (LongTensor, any shape) -> target token ids (the identity without a draft
        vocabulary)."""
        if self.draft_vocab_size is None:
            return indices
        return self.draft_vocab.to(indices.device)[indices]

    def from_target_ids(self, ids: torch.Tensor, missing: int = -100) -> torch.Tensor:
        """Target token ids (LongTensor, any shape) -> head output indices, ``missing`` for a token outside the
        draft vocabulary (the identity without one); for training labels and accuracy."""
        if self.draft_vocab_size is None:
            return ids
        table = torch.full((self.vocab_size,), missing, dtype=torch.long, device=ids.device)
        table[self.draft_vocab.to(ids.device)] = torch.arange(self.draft_vocab_size, device=ids.device)
        return torch.where(ids >= 0, table[ids.clamp_min(0)], ids)

    @classmethod
    def from_target(cls, target, num_heads: int = 3, draft_vocab=None, shared_head: bool = False) -> MedusaHeads:
        """Fresh heads for a transformers causal LM: identity blocks, output layers (one with ``shared_head``)
        copied from its LM head (its rows of ``draft_vocab`` when one is given; a copy, not tied: the target stays
        frozen), on the target's device and dtype."""
        weight = target.get_output_embeddings().weight
        heads = cls(weight.shape[1], weight.shape[0], num_heads, draft_vocab, shared_head)
        rows = weight if draft_vocab is None else weight[heads.draft_vocab.to(weight.device)]
        with torch.no_grad():
            for head in heads.lm_heads:
                head.weight.copy_(rows.detach().float())
        return heads.to(device=weight.device, dtype=weight.dtype)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden [..., D]`` (any float dtype and device; moved to the heads') -> logits ``[..., num_heads, V]``
        (``V_d`` with a draft vocabulary) in the heads' dtype: head k (at index
        k-1) applied to the feature f_t of token x_t predicts x_{t+1+k}, k positions after the next token x_{t+1}
        (which the target's own head predicts). Raises ``ValueError`` if the last dimension is not
        ``hidden_size``."""
        if hidden.size(-1) != self.hidden_size:
            raise ValueError(f"hidden must end in hidden_size={self.hidden_size}, got shape {tuple(hidden.shape)}")
        last = len(self.lm_heads) - 1  # 0 with a shared output layer
        param = self.lm_heads[0].weight
        hidden = hidden.to(param.device, param.dtype)
        return torch.stack([self.lm_heads[min(k, last)](block(hidden)) for k, block in enumerate(self.blocks)],
                           dim=-2)

    def save(self, directory, target=None) -> Path:
        """Write ``model.safetensors`` (float16, to keep the committed file small) and ``config.json`` into
        ``directory``; returns the weights path. With ``target`` (the model the heads were trained on) the config
        records its :func:`lab.assets.target_weights_key`, and :meth:`load` given another target refuses them."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to("cpu", torch.float16 if v.is_floating_point() else v.dtype).contiguous()
                 for k, v in self.state_dict().items()}
        save_file(state, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
        config = {"architecture": "medusa-1", "hidden_size": self.hidden_size, "vocab_size": self.vocab_size,
                  "num_heads": self.num_heads, "draft_vocab_size": self.draft_vocab_size,
                  "shared_head": self.shared_head, "dtype": "float16"}
        if target is not None:
            from lab.assets import TARGET_KEY, target_weights_key

            config[TARGET_KEY] = target_weights_key(target)
        (directory / CONFIG_FILE).write_text(json.dumps(config, indent=1))
        return directory / WEIGHTS_FILE

    @classmethod
    def load(cls, directory, device=None, dtype=torch.float32, target=None) -> MedusaHeads:
        """Load heads written by :meth:`save` (safetensors only, never pickles) onto ``device`` / ``dtype``,
        in eval mode; ``device`` None means ``target``'s device when a target is given (the heads read its hidden
        states), else the CPU. Raises ``FileNotFoundError`` naming the missing file and how to make it; ``ValueError``
        when the folder holds another kind of draft (:func:`lab.assets.check_model_type`); with ``target``,
        ``ValueError`` when the config records another target (:func:`lab.assets.check_target_key`: the heads were
        trained for another target, retrain with ``python -m lab train medusa``). Configs without that record load
        unchecked."""
        from safetensors.torch import load_file

        directory = Path(directory)
        for name in (CONFIG_FILE, WEIGHTS_FILE):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"Medusa heads not found: {directory / name} is missing; train them with "
                                        "`python -m lab train medusa` (Shakespeare) or `train chat-medusa` "
                                        "(smollm2-135m), or restore lab/assets from git")
        config = json.loads((directory / CONFIG_FILE).read_text())
        check_model_type(config, "lab-medusa", directory)
        if target is not None:
            from lab.assets import check_target_key

            # heads with a draft vocabulary are the real pair's (train chat-medusa), without one the Shakespeare pair's
            check_target_key(config, target, directory, "Medusa heads", "python -m lab train "
                             + ("medusa" if config.get("draft_vocab_size") is None else "chat-medusa"))
        state = load_file(str(directory / WEIGHTS_FILE))
        heads = cls(config["hidden_size"], config["vocab_size"], config["num_heads"], state.get("draft_vocab"),
                    bool(config.get("shared_head", False)))
        heads.load_state_dict(state)
        if device is None and target is not None:
            device = target.get_output_embeddings().weight.device
        return heads.to(device=device, dtype=dtype).eval().requires_grad_(False)  # inference weights


class MedusaDrafter:
    """Draft a token tree with Medusa heads on the target's last hidden state (Cai et al. 2024, Medusa-1).

    State: one feature vector, the target's hidden state at the token *before* the last committed one (that row
    produced the last committed token, so head k applied to it predicts the token k positions after it: head 1
    gives the first draft). The decode loop hands it over in ``reset(prompt, hidden=...)`` and ``observe``.

    ``propose`` evaluates the heads once (``Draft.calls = 1``), takes each head's top tokens and lays them out as
    the tree ``tree`` (see :data:`DEFAULT_TREE`, :func:`medusa_tree`), cut to ``request.max_tokens`` levels.
    The tree is deterministic at every temperature and ``Draft.probs`` is None: verification treats each node as
    a one-hot proposal, which keeps sampling exact (the output follows the target's distribution) at the price of
    lower acceptance than Medusa's typical acceptance (``generate(..., acceptance="typical")``), which is not
    exact. Before the first feature (a one-token prompt) the drafter proposes nothing: the loop takes a plain step.

    Raises ``ValueError`` if the heads do not match the target's width or vocabulary, or for an invalid ``tree``;
    ``TypeError`` when ``target`` is not a causal LM or ``heads`` is not :class:`MedusaHeads`.
    """

    needs_hidden_states = True

    def __init__(self, target, heads: MedusaHeads, tree=DEFAULT_TREE):
        if not callable(getattr(target, "get_output_embeddings", None)):
            raise TypeError(f"target must be a transformers causal LM (e.g. pair.target), got {type(target).__name__}")
        if not isinstance(heads, MedusaHeads):
            raise TypeError(f"heads must be MedusaHeads (MedusaHeads.load(directory) or MedusaHeads.from_target("
                            f"target)), got {type(heads).__name__}; for the bundled pair use "
                            "MedusaDrafter.from_pretrained(pair)")
        self.target, self.heads = target, heads
        out = target.get_output_embeddings().weight
        if (heads.hidden_size, heads.vocab_size) != (out.shape[1], out.shape[0]):
            raise ValueError(f"heads (hidden {heads.hidden_size}, vocab {heads.vocab_size}) do not fit the target "
                             f"(hidden {out.shape[1]}, vocab {out.shape[0]})")
        self.tree = _check_choices(tree, heads.num_heads, heads.output_size, name="tree")
        self.vocab_size = heads.vocab_size
        self.depth = max(len(p) for p in self.tree)
        # Candidates to take from every head's top-k: one more than the largest rank anywhere in the tree.
        self._top_k = max(p[-1] for p in self.tree) + 1
        self._feature: torch.Tensor | None = None
        self._observed: int | None = None  # accepted drafts of the step observed, None before observe

    @classmethod
    def from_pretrained(cls, pair, tree=DEFAULT_TREE, directory=None) -> MedusaDrafter:
        """The committed heads of ``pair`` (a :class:`lab.models.ModelPair`), loaded onto the target's device and
        dtype. ``directory`` overrides where to look (default: the pair's folder in :data:`MEDUSA_DIRS`).

        Raises ``FileNotFoundError`` naming the missing path (train with ``python -m lab train medusa``); for a
        pair without committed heads and no ``directory`` too. ``ValueError`` naming
        the folder when its heads were trained for another target than ``pair.target`` (a re-trained one: retrain
        them with ``python -m lab train medusa``), and as the constructor does. ``TypeError`` when ``pair`` is not
        a ``ModelPair`` (a name or a model, say)."""
        check_pair(pair, "MedusaDrafter.from_pretrained")
        if directory is None:
            if pair.name not in MEDUSA_DIRS:
                raise FileNotFoundError(f"no Medusa heads for the {pair.name!r} pair: committed ones exist for "
                                        f"{', '.join(map(repr, MEDUSA_DIRS))}; pass directory= for heads of your own")
            directory = MEDUSA_DIRS[pair.name]
        weight = pair.target.get_output_embeddings().weight
        heads = MedusaHeads.load(directory, device=weight.device, dtype=weight.dtype, target=pair.target)
        return cls(pair.target, heads, tree)

    def reset(self, prompt_ids, hidden: torch.Tensor | None = None) -> None:
        """Start a generation. ``hidden``: the target's hidden states ``[len(prompt_ids) - 1, D]`` (None or empty
        when ``prompt_ids`` holds one token); its last row is the feature that predicts the last token of
        ``prompt_ids``. The decode loop resets with the prompt and the prefill's first new token, so that row is the
        prompt's last position, the one whose logits gave the first new token. Raises ``ValueError`` when
        ``hidden`` is missing for a longer prompt or is not ``[len(prompt_ids) - 1, hidden_size]`` (a row too many
        would shift every draft by one position: still exact, but hardly ever accepted)."""
        rows = len(check_token_ids("prompt_ids", prompt_ids)) - 1
        if hidden is None and rows:
            raise ValueError(f"MedusaDrafter needs the target's hidden states: reset(prompt_ids, hidden=[{rows}, "
                             f"{self.heads.hidden_size}])")
        if hidden is not None and tuple(hidden.shape) != (rows, self.heads.hidden_size):
            raise ValueError(f"hidden must be [len(prompt_ids) - 1, hidden_size] = [{rows}, {self.heads.hidden_size}]"
                             f", got {tuple(hidden.shape)}")
        self._feature = hidden[-1].detach() if rows else None
        self._observed = None  # the first step's update needs its observe too

    @torch.inference_mode()
    def propose(self, request: DraftRequest) -> Draft:
        """A tree of at most ``len(tree)`` nodes and ``min(request.max_tokens, depth)`` levels, or an empty
        ``Draft()`` without a feature or with ``max_tokens <= 0``."""
        check_request(request)
        if self._feature is None or request.max_tokens <= 0:
            return Draft()
        param = self.heads.lm_heads[0].weight
        logits = self.heads(self._feature.to(param.device, param.dtype))       # [num_heads, V]
        top = self.heads.to_target(logits.topk(self._top_k, dim=-1).indices).cpu()  # [num_heads, k], best first
        tokens, parents = medusa_tree(top, self.tree, max_depth=request.max_tokens)
        return Draft(tokens, None, calls=1, parents=parents)

    def observe(self, output: TargetOutput) -> None:
        """Keep the hidden row that produced the step's ``next_token``: the last row on the accepted path.
        Raises ``ValueError`` when ``output.hidden`` is None (the loop was not asked for hidden states) or is not
        ``[rows, D]``, or the path does not start at row 0 or names a row past it."""
        if output.hidden is None:
            raise ValueError("MedusaDrafter needs the target's hidden states (needs_hidden_states = True), "
                             "got output.hidden = None")
        path = [int(r) for r in output.path]
        if not path or path[0] != 0 or max(path) >= len(output.hidden) or output.hidden.dim() != 2:
            raise ValueError(f"output.path must start at row 0 and name rows of output.hidden [rows, D], got path "
                             f"{path} and hidden of shape {tuple(output.hidden.shape)}")
        self._feature = output.hidden[path[-1]].detach()
        self._observed = len(path) - 1  # the accepted drafts, which update's num_accepted must match

    def update(self, num_accepted: int, next_token: int) -> None:
        """Nothing to roll back: the heads keep no cache, and ``observe`` already stored the accepted row. Raises
        ``ValueError`` when the step was not observed (the next draft would read a stale feature), when
        ``num_accepted`` disagrees with the observed path, or for a ``next_token`` outside the vocabulary."""
        if self._observed is None:
            raise ValueError("MedusaDrafter.update came without observe(output) since the last step: hand each "
                             "step's TargetOutput to observe before update (lab.decode.hand_over does)")
        if check_int("num_accepted", num_accepted, 0) != self._observed:
            raise ValueError(f"num_accepted ({num_accepted}) disagrees with the observed path ({self._observed} "
                             "accepted rows)")
        check_int("next_token", next_token, 0, self.vocab_size - 1)
        self._observed = None

    def kv_length(self) -> int:
        """The heads have no KV cache."""
        return 0

    def __repr__(self) -> str:
        return (f"MedusaDrafter(num_heads={self.heads.num_heads}, tree={len(self.tree)} nodes, "
                f"depth={self.depth})")


@torch.no_grad()
def head_accuracy(target, heads: MedusaHeads, features: dict, batch: int = 8) -> dict:
    """Teacher-forced accuracy of each head on held-out windows (corpus text, or the target's own text).

    ``features``: :func:`lab.training.features.target_features` or
    :func:`lab.training.features.target_generations` output,
    ``{"ids": Long [B, T], "hidden": [B, T, D]}``. Head k at position t is right when the window's token
    ``ids[t + 1 + k]`` is its argmax (top-1) or among its 5 best (top-5); the target's own LM head (predicting
    ``ids[t + 1]``) is reported alongside for reference.

    Returns ``{"top1": [head 1, ...], "top5": [...], "target_top1": float, "target_top5": float,
    "positions": [scored positions per head]}``. Raises ``ValueError`` for mismatched ids/hidden shapes. Heads with
    a draft vocabulary are scored in target ids (a token outside it is always a miss).
    """
    ids, hidden = features["ids"], features["hidden"]
    if ids.shape != hidden.shape[:2]:
        raise ValueError(f"features: ids {tuple(ids.shape)} and hidden {tuple(hidden.shape)} disagree")
    param = heads.lm_heads[0].weight
    lm_head = target.get_output_embeddings()
    was_training = heads.training
    heads.eval()
    n = heads.num_heads
    hits1, hits5, counts = [0] * (n + 1), [0] * (n + 1), [0] * (n + 1)   # index 0 = the target's own head
    for i in range(0, len(ids), batch):
        h = hidden[i:i + batch].to(param.device, param.dtype)
        x = ids[i:i + batch].to(param.device)
        own = lm_head(h.to(lm_head.weight.device, lm_head.weight.dtype)).topk(5, dim=-1).indices  # [B, T, 5]
        own = own.unsqueeze(-2).to(param.device)                                                  # [B, T, 1, 5]
        tops = torch.cat([own, heads.to_target(heads(h).topk(5, dim=-1).indices)], dim=-2)  # [B, T, 1 + n, 5]
        for k in range(n + 1):
            span = x.size(1) - 1 - k          # positions t with a token at t + 1 + k
            if span <= 0:
                continue
            top5 = tops[:, :span, k]
            gold = x[:, 1 + k:].unsqueeze(-1)
            hits1[k] += (top5[..., :1] == gold).sum().item()
            hits5[k] += (top5 == gold).any(-1).sum().item()
            counts[k] += gold.numel()
    heads.train(was_training)

    def rate(hits, count):
        return round(hits / count, 4) if count else float("nan")

    return {"top1": [rate(hits1[k], counts[k]) for k in range(1, n + 1)],
            "top5": [rate(hits5[k], counts[k]) for k in range(1, n + 1)],
            "target_top1": rate(hits1[0], counts[0]), "target_top5": rate(hits5[0], counts[0]),
            "positions": counts[1:]}
