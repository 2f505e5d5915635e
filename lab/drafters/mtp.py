"""Multi-token-prediction (MTP) heads in DeepSeek-V3's form: D sequential modules on the frozen target, one per depth.

Source: DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv 2412.19437), §2.2 "Multi-Token Prediction", and the
engines that draft with such modules (vLLM ``speculative_config={"method": "mtp"}``, SGLang's NEXTN/EAGLE path).

Module k (k = 1..D) reads, at every position i, the previous depth's hidden state h^{k-1}_i and the shared
embedding of the token k steps ahead, Emb(t_{i+k}). It RMS-normalises each, concatenates them, projects 2d -> d
(M_k), runs ONE transformer block (TRM_k, causal over the positions) and hands h^k_i to the shared output head, which
predicts t_{i+k+1}. h^0 is the target's own last hidden state. So depth k sees what depth k-1 computed and the token
depth k-1 predicted:

- unlike Medusa (:mod:`lab.drafters.medusa`), whose heads all read the same h^0 and never see the tokens drafted
  before them, and
- unlike EAGLE (:mod:`lab.drafters.eagle`), which applies ONE module again and again to its own outputs, MTP has its
  own module per depth, each trained for exactly that depth.

Drafting a chain of D tokens after the committed tokens t_0..t_L costs one forward per module, at row L - 1:
module 1 turns (h^0_{L-1}, t_L) into the first draft, module 2 turns (h^1_{L-1}, first draft) into the second, and
so on. Each module keeps its own KV cache of its *true* rows (rows whose inputs are all committed: i + k <= L);
rows that read a drafted token are rolled back before ``propose`` returns, exactly as EAGLE's draft rows are.

Choices of this course, kept consistent with EAGLE here (not the report's letter):
- h^0 is the target's hidden state after its final norm (the input of its LM head, what
  :class:`lab.drafters.base.TargetOutput` carries and the EAGLE data cache holds), and the h^k a module passes on is
  its block's output after the block's own final RMSNorm (DeepSeek-V3's ``shared_head.norm``), the vector the shared
  head reads. The report passes the pre-norm state on; module k+1's ``norm_h`` renormalises either way.
- The shared head is the target's (frozen; SmolLM2 ties it to the embedding), optionally restricted to the rows of
  a reduced draft vocabulary (:mod:`lab.drafters.draft_vocab`, FR-Spec / EAGLE-3's d2t), which keeps drafting cheap;
  every other token then has draft probability 0, which keeps rejection sampling exact.

Training: :mod:`lab.training.chat_mtp` (``python -m lab train chat-mtp``); committed weights per pair in
:data:`MTP_DIRS` (``lab/assets/<pair>/mtp/``: safetensors + config.json + training.json).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import torch

from lab.assets import PAIR_DIR, SMOLLM2_DIR, TARGET_KEY, check_model_type, check_target_key, target_weights_key
from lab.drafters.base import Draft, DraftRequest, TargetOutput, check_pair, check_request, draft_token
from lab.drafters.draft_vocab import check_draft_vocab
from lab.kv import cache_length, rollback
from lab.models import cache_kwarg, new_cache, vocab_size
from lab.validation import check_int, check_token_ids, is_integer

__all__ = ["MTP_DIRS", "MTPDrafter", "MTPHeads"]

MTP_DIRS = {"shakespeare": PAIR_DIR / "mtp", "smollm2-135m": SMOLLM2_DIR / "mtp"}
"""The committed MTP heads, by pair name (``python -m lab train mtp`` / ``chat-mtp``)."""

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


class _MTPModule(torch.nn.Module):
    """One depth: ``norm_h``, ``norm_emb`` (RMSNorm d), ``proj`` (Linear 2d -> d, M_k) and one Llama decoder block
    (a 1-layer ``transformers.LlamaModel`` fed ``inputs_embeds``: its KV cache, RoPE and causal mask are the
    target's; its final RMSNorm is the norm before the shared head)."""

    def __init__(self, width: int, heads: int, kv_heads: int, intermediate: int, max_positions: int,
                 rope_theta: float, eps: float):
        super().__init__()
        from transformers import LlamaConfig, LlamaModel
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        self.norm_h = LlamaRMSNorm(width, eps=eps)
        self.norm_emb = LlamaRMSNorm(width, eps=eps)
        self.proj = torch.nn.Linear(2 * width, width, bias=False)
        cfg = LlamaConfig(vocab_size=1, hidden_size=width, intermediate_size=intermediate, num_hidden_layers=1,
                          num_attention_heads=heads, num_key_value_heads=kv_heads,
                          max_position_embeddings=max_positions, rope_theta=rope_theta, rms_norm_eps=eps,
                          pad_token_id=None, bos_token_id=None, eos_token_id=None, tie_word_embeddings=False)
        self.block = LlamaModel(cfg)
        self.block.embed_tokens.weight.requires_grad_(False)  # unused: the projected input replaces it
        self.cache_kwarg = cache_kwarg(type(self.block))


class MTPHeads(torch.nn.Module):
    """D multi-token-prediction modules on a target LM (DeepSeek-V3, §2.2), sharing its embedding and output head.

    Arguments: ``target`` (a transformers causal LM; its embedding and LM head are used, never copied, trained or
    saved), ``config`` (keys ``depth`` D, ``heads``, ``kv_heads``, ``intermediate``; ``heads`` / ``kv_heads`` None =
    the target's) and ``draft_vocab`` (None, or LongTensor ``[V_d]`` of target ids: the head is then the target's
    LM-head rows of those ids, every other token gets probability 0). The block of every module works at the
    target's width d (as in the report: M_k projects 2d -> d). The modules are built in float32 on the target's
    device. Raises ``ValueError`` for ``depth`` < 1, a
    non-positive ``intermediate``, a width not divisible by ``heads``, ``heads`` not divisible by ``kv_heads``, or a
    malformed ``draft_vocab``.
    """

    DEFAULTS: ClassVar[dict] = {"depth": 2, "heads": None, "kv_heads": None, "intermediate": 512}

    def __init__(self, target, config: dict | None = None, draft_vocab=None):
        super().__init__()
        tcfg = target.config
        width = int(tcfg.hidden_size)
        cfg = dict(self.DEFAULTS, **(config or {}))
        cfg["heads"] = int(cfg["heads"] or tcfg.num_attention_heads)
        cfg["kv_heads"] = int(cfg["kv_heads"] or getattr(tcfg, "num_key_value_heads", None) or cfg["heads"])
        depth, heads, kv_heads, intermediate = (cfg["depth"], cfg["heads"], cfg["kv_heads"], cfg["intermediate"])
        if not is_integer(depth) or depth < 1:
            raise ValueError(f"config['depth'] (the number of MTP modules D) must be an integer >= 1, got {depth!r}")
        if not is_integer(intermediate) or intermediate < 1:
            raise ValueError(f"config['intermediate'] must be an integer >= 1, got {intermediate!r}")
        if heads < 1 or width % heads:
            raise ValueError(f"config['heads'] ({heads}) must divide the target's width ({width})")
        if kv_heads < 1 or heads % kv_heads:
            raise ValueError(f"config['heads'] ({heads}) must be a multiple of config['kv_heads'] ({kv_heads})")
        rope = getattr(tcfg, "rope_parameters", None) or {}
        self.config = {"depth": int(depth), "heads": heads, "kv_heads": kv_heads, "intermediate": int(intermediate),
                       "width": width, "vocab_size": vocab_size(target),
                       "max_positions": int(getattr(tcfg, "max_position_embeddings", 2048) or 2048),
                       "rope_theta": float(rope.get("rope_theta", getattr(tcfg, "rope_theta", 10000.0))),
                       "rms_norm_eps": float(getattr(tcfg, "rms_norm_eps", 1e-6)), "draft_vocab_size": None}
        object.__setattr__(self, "target", target)  # shared and frozen: not a submodule, never saved
        self.layers = torch.nn.ModuleList(
            _MTPModule(width, heads, kv_heads, int(intermediate), self.config["max_positions"],
                       self.config["rope_theta"], self.config["rms_norm_eps"]) for _ in range(int(depth)))
        if draft_vocab is not None:
            ids = check_draft_vocab(draft_vocab, self.config["vocab_size"])
            self.config["draft_vocab_size"] = int(ids.numel())
            self.register_buffer("draft_vocab", ids)  # saved: draft index -> target id
            head = target.get_output_embeddings()
            self.register_buffer("head_rows", head.weight.detach()[ids].float().clone(), persistent=False)
            bias = getattr(head, "bias", None)
            self.register_buffer("head_bias", None if bias is None else bias.detach()[ids].float().clone(),
                                 persistent=False)
        self.to(target.get_input_embeddings().weight.device)  # the target's: a split model fails at its first forward

    @property
    def depth(self) -> int:
        """D, the number of modules: the longest chain one proposal drafts."""
        return self.config["depth"]

    def parameter_count(self) -> int:
        """Parameters the modules train and save (the unused 1-row embedding tables of the blocks left out)."""
        return sum(p.numel() for name, p in self.named_parameters() if ".block.embed_tokens." not in name)

    # -- the shared target parts ----------------------------------------------------------------------------
    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The target's (shared) input embedding of ``tokens`` (LongTensor ``[...]``) -> ``[..., d]``."""
        return self.target.get_input_embeddings()(tokens)

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The shared head on module outputs ``[..., d]`` -> float32 logits ``[..., V_d]`` over the draft vocabulary
        (``[..., V]`` without one). Training scores these."""
        if self.config["draft_vocab_size"] is None:
            head = self.target.get_output_embeddings()
            return head(hidden.to(head.weight.dtype)).float()
        return torch.nn.functional.linear(hidden.to(self.head_rows.dtype), self.head_rows, self.head_bias).float()

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``[..., V]`` over the target's whole vocabulary: :meth:`head_logits` in place, ``-inf``
        (probability 0) outside the draft vocabulary."""
        reduced = self.head_logits(hidden)
        if self.config["draft_vocab_size"] is None:
            return reduced
        full = reduced.new_full((*reduced.shape[:-1], self.config["vocab_size"]), float("-inf"))
        full[..., self.draft_vocab.to(full.device)] = reduced
        return full

    def to_draft_ids(self, ids: torch.Tensor, missing: int = -100) -> torch.Tensor:
        """Target ids (LongTensor, any shape; negative ids pass through) -> indices of :meth:`head_logits`, with
        ``missing`` for a token outside the draft vocabulary: training labels."""
        if self.config["draft_vocab_size"] is None:
            return ids
        table = torch.full((self.config["vocab_size"],), missing, dtype=torch.long, device=ids.device)
        table[self.draft_vocab.to(ids.device)] = torch.arange(self.config["draft_vocab_size"], device=ids.device)
        return torch.where(ids >= 0, table[ids.clamp_min(0)], ids)

    def to_target_ids(self, indices: torch.Tensor) -> torch.Tensor:
        """Indices of :meth:`head_logits` -> target ids (the identity without a draft vocabulary)."""
        if self.config["draft_vocab_size"] is None:
            return indices
        return self.draft_vocab.to(indices.device)[indices]

    # -- one depth ------------------------------------------------------------------------------------------
    def step(self, k: int, hidden: torch.Tensor, tokens, cache=None, position_ids=None) -> torch.Tensor:
        """Module ``k`` (1..D) on rows i: h^k_i = TRM_k(M_k [RMSNorm(h^{k-1}_i); RMSNorm(Emb(t_{i+k}))]).

        - ``hidden``: h^{k-1}, ``[B, n, d]`` or ``[n, d]`` (h^0: the target's last hidden states), any float dtype
          and device (moved to the modules').
        - ``tokens``: LongTensor ``[B, n]`` / ``[n]``: t_{i+k} of each row.
        - ``cache``: this module's ``DynamicCache`` to append to (None: no caching, e.g. training).
        - ``position_ids``: ``[B, n]`` / ``[n]``; the convention of this module: row i of depth k sits at position
          i + k, the position of the token it reads. Default: from the cache length on.

        Returns h^k ``[B, n, d]`` (``[n, d]`` unbatched) in the modules' dtype; the shared head on row i predicts
        t_{i+k+1}. Raises ``ValueError`` for ``k`` outside 1..D or mismatched shapes."""
        if not is_integer(k) or not 1 <= k <= self.depth:
            raise ValueError(f"k must be a depth in 1..{self.depth}, got {k!r}")
        unbatched = hidden.dim() == 2
        module = self.layers[k - 1]
        device = module.proj.weight.device  # the modules' device, whatever the caller's tensors are on
        hidden = hidden.to(device)
        tokens = torch.as_tensor(tokens, dtype=torch.long, device=device)
        if unbatched:
            hidden, tokens = hidden[None], tokens[None]
        if hidden.dim() != 3 or tokens.shape != hidden.shape[:2]:
            raise ValueError(f"hidden [B, n, d] and tokens [B, n] must agree, got {tuple(hidden.shape)} and "
                             f"{tuple(tokens.shape)}")
        if hidden.size(-1) != self.config["width"]:
            raise ValueError(f"hidden must have the target's width d = {self.config['width']}, got width "
                             f"{hidden.size(-1)}")
        dtype = module.proj.weight.dtype
        x = module.proj(torch.cat([module.norm_h(hidden.to(dtype)), module.norm_emb(self.embed(tokens).to(dtype))],
                                  dim=-1))
        kwargs = {"inputs_embeds": x, "use_cache": cache is not None}
        if cache is not None:
            kwargs[module.cache_kwarg] = cache
        if position_ids is not None:
            kwargs["position_ids"] = torch.as_tensor(position_ids, dtype=torch.long, device=x.device).view(-1,
                                                                                                          x.size(1))
        out = module.block(**kwargs).last_hidden_state
        return out[0] if unbatched else out

    def forward(self, hidden: torch.Tensor, ids: torch.Tensor) -> list[torch.Tensor]:
        """Teacher forcing over whole sequences (training and the held-out agreement; DeepSeek-V3 §2.2): ``hidden``
        = the target's h^0 ``[B, T, d]``, ``ids`` LongTensor ``[B, T]``. Returns ``[h^1, ..., h^D]``, h^k of shape
        ``[B, T - k, d]``: row i read (h^{k-1}_i, t_{i+k}) and its head predicts ``ids[:, i + k + 1]`` (rows
        i <= T - k - 2 have a label). Raises ``ValueError`` when ``T`` <= D or the shapes disagree."""
        if ids.dim() != 2 or hidden.shape[:2] != ids.shape:
            raise ValueError(f"hidden [B, T, d] and ids [B, T] must agree, got {tuple(hidden.shape)} and "
                             f"{tuple(ids.shape)}")
        T = ids.size(1)
        if T <= self.depth:
            raise ValueError(f"ids must hold more than depth = {self.depth} tokens per row, got T = {T}")
        outs, h = [], hidden
        for k in range(1, self.depth + 1):
            n = T - k
            positions = torch.arange(k, k + n, device=ids.device).expand(ids.size(0), n)
            h = self.step(k, h[:, :n], ids[:, k:], position_ids=positions)
            outs.append(h)
        return outs

    # -- files ----------------------------------------------------------------------------------------------
    def save_pretrained(self, directory) -> Path:
        """Write ``model.safetensors`` (float16 modules, the int64 ``draft_vocab``) and ``config.json`` (with the
        target's :func:`lab.assets.target_weights_key`) into ``directory``; returns the directory."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to("cpu", torch.float16 if v.is_floating_point() else v.dtype).contiguous()
                 for k, v in self.state_dict().items() if ".block.embed_tokens." not in k}
        save_file(state, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
        config = {"model_type": "lab-mtp", **self.config, TARGET_KEY: target_weights_key(self.target)}
        (directory / CONFIG_FILE).write_text(json.dumps(config, indent=1))
        return directory

    @classmethod
    def from_pretrained(cls, target, directory) -> MTPHeads:
        """Load what :meth:`save_pretrained` wrote for ``target`` (safetensors only), in the target's dtype and on
        its device, eval mode. Raises ``FileNotFoundError`` naming the missing file and ``python -m lab train
        chat-mtp``; ``ValueError`` when the folder holds another kind of draft (:func:`lab.assets.check_model_type`),
        when the files were made for a target of another width or vocabulary, for
        another target (its :func:`lab.assets.target_weights_key`), or do not match the config."""
        from safetensors.torch import load_file

        directory = Path(directory)
        for name in (CONFIG_FILE, WEIGHTS_FILE):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"no MTP heads at {directory}: {name} is missing (model.safetensors + "
                                        "config.json); train them with `python -m lab train chat-mtp` (smollm2-135m) "
                                        "or `python -m lab train mtp` (shakespeare), or restore lab/assets from git")
        config = json.loads((directory / CONFIG_FILE).read_text())
        check_model_type(config, "lab-mtp", directory)
        for key, mine in (("width", int(target.config.hidden_size)), ("vocab_size", vocab_size(target))):
            if config.get(key) != mine:
                raise ValueError(f"the MTP heads in {directory} were trained for {key} {config.get(key)}, this target "
                                 f"has {mine}")
        # heads with a draft vocabulary are the real pair's (train chat-mtp), without one the Shakespeare pair's
        check_target_key(config, target, directory, "MTP heads", "python -m lab train " + (
            "mtp" if config.get("draft_vocab_size") is None else "chat-mtp"))
        state = load_file(str(directory / WEIGHTS_FILE))
        draft_vocab = state.get("draft_vocab")
        if (draft_vocab is None) != (config.get("draft_vocab_size") is None):
            raise ValueError(f"{directory}: config.json and model.safetensors disagree on the draft vocabulary")
        model = cls(target, {k: config[k] for k in cls.DEFAULTS}, draft_vocab=draft_vocab)
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if ".block.embed_tokens." not in k]
        if missing or unexpected:
            raise ValueError(f"{directory / WEIGHTS_FILE} does not match the MTP heads of its config.json: missing "
                             f"{missing}, unexpected {unexpected}")
        param = next(target.parameters())
        return model.to(device=param.device, dtype=param.dtype).eval().requires_grad_(False)


class MTPDrafter:
    """Drafter protocol (:mod:`lab.drafters.base`) around :class:`MTPHeads`: a chain of up to ``n_draft`` <= D
    tokens, token k from module k (DeepSeek-V3 §2.2; vLLM's ``method: "mtp"`` drafts the same way).

    State: the committed tokens, the target's h^0 of every committed token but the newest (reset's prefill, then
    ``observe``), each module's outputs on its true rows, and one KV cache per module holding exactly its true rows
    (module k: rows i with i + k <= L for committed t_0..t_L). ``propose`` first feeds each module the rows it has
    not seen, then the draft rows that read drafted tokens (k - 1 of them for module k), and rolls those back
    (:func:`lab.kv.rollback`) before returning.

    At T = 0 each token is the argmax and ``Draft.probs`` is None (one-hot verification); at T > 0 each is drawn
    from ``lab.sampling.probs_from_logits`` of its module's logits with the request's settings and generator, the
    rows ``[n, V]`` float32 on the CPU returned for rejection sampling. ``needs_hidden_states = True``: the decode
    loop passes ``reset(prompt_ids, hidden=...)`` and each step's :class:`~lab.drafters.base.TargetOutput`.

    Raises ``ValueError`` for ``n_draft`` outside 1..D or heads built for another width or vocabulary,
    ``TypeError`` when ``target`` is not a causal LM or ``heads`` not :class:`MTPHeads`.
    """

    needs_hidden_states = True

    def __init__(self, target, heads: MTPHeads, n_draft: int | None = None):
        if not callable(getattr(target, "get_output_embeddings", None)):
            raise TypeError(f"target must be a transformers causal LM (e.g. pair.target), got {type(target).__name__}")
        if not isinstance(heads, MTPHeads):
            raise TypeError(f"heads must be MTPHeads (MTPHeads(target) or MTPHeads.from_pretrained(target, dir)), "
                            f"got {type(heads).__name__}")
        depth = heads.depth
        if n_draft is None:
            n_draft = depth
        if not is_integer(n_draft) or not 1 <= n_draft <= depth:
            raise ValueError(f"n_draft must be an integer in 1..{depth} (one token per MTP module), got {n_draft!r}")
        if heads.config["width"] != target.config.hidden_size:
            raise ValueError(f"heads read hidden states of width {heads.config['width']}, the target's are "
                             f"{target.config.hidden_size}")
        if heads.config["vocab_size"] != vocab_size(target):
            raise ValueError(f"heads draft over a vocabulary of {heads.config['vocab_size']} tokens, this target's "
                             f"has {vocab_size(target)}: build them for this target")
        self.target, self.heads, self.n_draft = target, heads.eval(), int(n_draft)
        self.vocab_size = vocab_size(target)
        self._caches = None
        self._tokens: list[int] = []
        self._outputs: list[list[torch.Tensor]] = []  # _outputs[k]: h^k of the true rows 0.. (k = 0: the target's)
        self._last: list[int] = []
        self._observed = None

    @classmethod
    def from_pretrained(cls, pair, n_draft: int | None = None, directory=None) -> MTPDrafter:
        """The committed MTP heads of ``pair`` (:data:`MTP_DIRS`; ``directory`` overrides) on ``pair.target``,
        drafting ``n_draft`` tokens (default D). Raises ``FileNotFoundError`` for a pair without committed heads
        or missing files (naming ``python -m lab train chat-mtp``), ``ValueError`` when they were trained for
        another target, ``TypeError`` when ``pair`` is not a ``ModelPair``."""
        check_pair(pair, "MTPDrafter.from_pretrained")
        if directory is None:
            if pair.name not in MTP_DIRS:
                raise FileNotFoundError(f"no MTP heads for the {pair.name!r} pair: committed ones exist for "
                                        f"{', '.join(map(repr, MTP_DIRS))}; pass directory= for heads of your own")
            directory = MTP_DIRS[pair.name]
        return cls(pair.target, MTPHeads.from_pretrained(pair.target, directory), n_draft=n_draft)

    def __repr__(self) -> str:
        return (f"MTPDrafter(n_draft={self.n_draft}, depth={self.heads.depth}, "
                f"parameters={self.heads.parameter_count():,})")

    # -- protocol -------------------------------------------------------------------------------------------
    def reset(self, prompt_ids, hidden=None) -> None:
        """Start a generation: ``hidden`` = the target's h^0 ``[len(prompt_ids) - 1, d]`` for every token of
        ``prompt_ids`` but the last (None allowed when it holds one token). The decode loop resets with the prompt
        and the prefill's first new token, and hands over the prefill's h^0 over the whole prompt. Raises
        ``ValueError`` for an empty ``prompt_ids`` or a missing or misshapen ``hidden``."""
        prompt = check_token_ids("prompt_ids", prompt_ids, self.vocab_size)
        if hidden is not None and not isinstance(hidden, torch.Tensor):
            raise TypeError(f"hidden must be a tensor of the target's h^0 or None, got {type(hidden).__name__}")
        rows, d = len(prompt) - 1, self.heads.config["width"]
        if hidden is None:
            if rows:
                raise ValueError("MTPDrafter needs the target's hidden states: reset(prompt_ids, hidden=[L-1, d])")
            hidden = torch.zeros(0, d)
        if tuple(hidden.shape) != (rows, d):
            raise ValueError(f"hidden must be [len(prompt_ids) - 1, d] = [{rows}, {d}], got {tuple(hidden.shape)}")
        dtype = self.heads.layers[0].proj.weight.dtype
        self._caches = [new_cache() for _ in range(self.heads.depth)]
        self._tokens = prompt
        self._outputs = [list(hidden.detach().to(dtype))] + [[] for _ in range(self.heads.depth)]
        self._last, self._observed = [], None

    @torch.inference_mode()
    def propose(self, request: DraftRequest) -> Draft:
        """A chain of ``min(n_draft, request.max_tokens)`` tokens, token k from module k at the newest row. An
        empty ``Draft()`` when nothing may be drafted or no target hidden state exists yet (one-token prompt).
        Raises ``RuntimeError`` before :meth:`reset`."""
        check_request(request)
        if self._caches is None:
            raise RuntimeError("call reset(prompt_ids, hidden=...) before propose()")
        self._last, self._observed = [], None
        n = min(self.n_draft, int(request.max_tokens))
        L = len(self._tokens) - 1
        if n <= 0 or L < 1:
            return Draft()
        sequence = list(self._tokens)   # committed, then the drafts as they come
        below = None                    # h^{k-1} of rows [0, L), the true ones stored, the rest from this step
        tokens, rows, calls = [], [], 0
        for k in range(1, n + 1):
            cache = self._caches[k - 1]
            start = cache_length(cache)
            true_end = max(0, L - k + 1)  # rows i <= L - k read committed tokens only
            if start < L:
                source = below if k > 1 else self._outputs[0]
                out = self.heads.step(k, torch.stack(source[start:L]), sequence[start + k:L + k], cache,
                                      position_ids=torch.arange(start + k, L + k))
                calls += 1
                self._outputs[k].extend(out[:true_end - start])
                rollback(cache, true_end)
                below = self._outputs[k][:true_end] + list(out[true_end - start:])
            else:  # module 1 has every row already: a second proposal before update
                below = self._outputs[k][:L]
            token, probs = draft_token(self.heads.logits(below[L - 1]), request)
            tokens.append(token)
            if probs is not None:
                rows.append(probs)
            sequence.append(token)
        self._last = tokens
        return Draft(tokens, torch.stack(rows) if rows else None, calls)

    def observe(self, output: TargetOutput) -> None:
        """Keep the target's hidden states of the committed rows (``output.hidden[output.path]``): h^0 of the last
        committed token and of each accepted draft. Raises ``ValueError`` without hidden states or for a path that
        does not start at row 0 or names rows that were not drafted."""
        if output.hidden is None:
            raise ValueError("MTPDrafter needs TargetOutput.hidden (it sets needs_hidden_states = True)")
        path = [int(r) for r in output.path]
        if not path or path[0] != 0 or path != list(range(len(path))) or len(path) - 1 > len(self._last):
            raise ValueError(f"output.path must be the chain's rows 0, 1, 2, ... (at most {len(self._last)} drafts), "
                             f"got {path}")
        self._observed = output.hidden[path].detach().to(self.heads.layers[0].proj.weight.dtype)

    def update(self, num_accepted: int, next_token: int) -> None:
        """Commit the accepted drafts and ``next_token``; the module caches already hold only true rows. Raises
        ``RuntimeError`` when ``observe`` did not hand over this step's hidden states, ``ValueError`` when
        ``num_accepted`` disagrees with them."""
        if self._observed is None:
            raise RuntimeError("MTPDrafter.update needs this step's target hidden states: the decode loop must call "
                               "observe(TargetOutput) with hidden states (needs_hidden_states) before update")
        if len(self._observed) != num_accepted + 1:
            raise ValueError(f"num_accepted ({num_accepted}) disagrees with the observed path "
                             f"({len(self._observed) - 1} accepted rows)")
        self._outputs[0].extend(self._observed)
        self._tokens += self._last[:num_accepted] + [check_int("next_token", next_token, 0, self.vocab_size - 1)]
        self._last, self._observed = [], None

    def cached_rows(self) -> list[int]:
        """Rows in each module's KV cache (module 1 first; empty before ``reset``): its true rows. Like EAGLE's
        ``cached_pairs``, deliberately not ``kv_length()``: slot i of module k holds (h^{k-1}_i, t_{i+k}), not
        committed token i."""
        return [] if self._caches is None else [cache_length(c) for c in self._caches]
