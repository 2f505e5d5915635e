"""The drafter protocol: every drafting method plugs into the same decode loop through it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol, runtime_checkable

import torch

from lab.validation import check_int, check_sampling_args, check_unbounded_ids

__all__ = ["Draft", "DraftRequest", "Drafter", "TargetOutput", "check_request", "draft_token"]


@dataclass
class DraftRequest:
    """What the decode loop tells a drafter before each target call.

    ``tokens``: every committed token id so far (prompt + new tokens). ``max_tokens``: the most tokens worth
    drafting (the loop caps it so no block runs past ``max_new_tokens``). Sampling settings are the ones the
    target uses: a drafter that samples must process its logits the same way (``lab.sampling.probs_from_logits``)
    and draw with ``generator``. Raises ``ValueError`` for a ``max_tokens`` that is not an integer >= 0 and for
    sampling settings :func:`lab.validation.check_sampling_args` refuses (a negative temperature, say), and
    ``TypeError`` / ``ValueError`` naming ``tokens`` when they are not a list and not token ids either (a tensor or
    tuple of ids is taken as a list). A list is taken as it is, unchecked: the decode loop builds one per step, and
    checking every id of a long context on every step would cost more than the loop's own work.
    """

    tokens: list
    max_tokens: int
    temperature: float = 0.0
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    generator: Optional[torch.Generator] = None

    def __post_init__(self):
        # checked once here for every drafter: 2.5 raised a bare slice error in some, -1 drafted nothing silently
        self.max_tokens = check_int("DraftRequest.max_tokens", self.max_tokens, 0)
        if type(self.tokens) is not list:  # None raised an AttributeError inside a drafter
            self.tokens = check_unbounded_ids("DraftRequest.tokens", self.tokens)
        self.temperature, self.top_k, self.top_p = check_sampling_args(self.temperature, self.top_k, self.top_p)


def check_request(request) -> None:
    """Raise ``TypeError`` unless ``request`` is a :class:`DraftRequest` (what every drafter's ``propose`` checks
    first: ``propose(None)`` raised an AttributeError about ``max_tokens`` from inside the drafter)."""
    if not isinstance(request, DraftRequest):
        raise TypeError(f"request must be a lab.drafters.base.DraftRequest (tokens, max_tokens, ...), got "
                        f"{type(request).__name__}")


@dataclass
class Draft:
    """A drafter's proposal: token ids, their draft probabilities ``[len(tokens), V]`` float32 (None for a
    deterministic drafter, which verification then treats as one-hot), and the draft forward passes it cost.

    A drafter that needs the target's predictions at other positions too (Lookahead decoding's Jacobi window,
    lesson 09) may add ``extra_tokens`` to the same target forward: they are fed after ``[last] + tokens`` at
    positions ``last's position + extra_positions[i]``, each attending to the cached prefix and to the new tokens
    that ``extra_mask`` (bool ``[len(extra_tokens), 1 + len(tokens) + len(extra_tokens)]``, True = may attend)
    allows; the chain itself never sees them. They are never verified or committed; their keys/values are rolled
    back with the rejected drafts, and the drafter receives the step's logits through its optional
    ``observe(output)`` method.

    A drafter may propose a *token tree* instead of a chain (Medusa, EAGLE; lesson 10): ``parents[i]`` is the
    index of node i's parent in ``tokens`` (always ``< i``) or -1 for a child of the last committed token. Then
    ``probs[i]`` is the distribution node i was drawn from (for siblings drawn without replacement: with the earlier
    siblings removed and renormalised), and verification accepts one root-to-leaf path. A chain is the tree
    ``parents = [-1, 0, 1, ...]``; ``parents=None`` means a chain."""

    tokens: list = field(default_factory=list)
    probs: Optional[torch.Tensor] = None
    calls: int = 0
    extra_tokens: list = field(default_factory=list)
    extra_positions: list = field(default_factory=list)
    extra_mask: Optional[torch.Tensor] = None
    parents: Optional[list] = None


@dataclass
class TargetOutput:
    """What the target's verification forward produced, handed to a drafter's optional ``observe`` after
    verification and before ``update``.

    - ``logits``: float32 ``[rows, V]``, one row per fed token: row 0 is the last committed token, row 1 + i is
      draft node i (then any ``extra_tokens``).
    - ``hidden``: the target's last-layer hidden state after its final norm (the input of its LM head), float32
      ``[rows, D]`` on the target's device, or None unless the drafter sets ``needs_hidden_states = True``. A drafter
      that declares ``hidden_layers`` (indices of :func:`lab.models.layer_states`; EAGLE-3 reads three) gets those
      layers concatenated instead, ``[rows, len(hidden_layers) · D]``, here and in ``reset(..., hidden=...)``.
    - ``path``: the rows whose tokens are now committed, in order: ``[0] + [1 + i for each accepted node i]`` (on a
      last step that an EOS or ``max_new_tokens`` cut, only the nodes kept: :func:`lab.decode.hand_over`). The last
      of them produced ``next_token``.
    """

    logits: torch.Tensor
    hidden: Optional[torch.Tensor]
    path: list


@runtime_checkable
class Drafter(Protocol):
    """``reset`` once per generation, then per step ``propose`` and, after verification, ``update``.

    What the loop (:func:`lab.decode.generate`, :func:`lab.batched.generate_batch`) guarantees: each step calls
    ``propose`` once, then ``observe`` (if the drafter has it), then ``update``; ``request.tokens`` is always the
    committed sequence, i.e. the ``reset`` tokens plus, after each step, the accepted drafts and ``next_token``. So
    a drafter may read its context from ``request.tokens`` alone (prompt lookup keeps no state) or keep its own
    copy, updated in ``update`` (a draft model's KV cache); one that keeps a copy should check it against
    ``request.tokens`` and raise ``ValueError`` when they differ (a caller that skipped ``update``), as
    :class:`lab.drafters.DraftModelDrafter` does, rather than draft from a stale context.

    Adding a drafting method: one module in ``lab/drafters/`` behind this protocol, exported from
    :mod:`lab.drafters`; one :class:`lab.registry.DrafterSpec` record in :data:`lab.registry.DRAFTER_SPECS` (name,
    label, how to build it, its bench row, what sets its draft, the pairs it is trained for), from which the command
    line, bench, arena and race tables are derived; then the oracles every drafter passes (README, "Adding a
    drafting method").
    """

    def reset(self, prompt_ids: list) -> None:
        """Start a new generation from ``prompt_ids`` (list[int]): the committed tokens, which the decode loop
        (:func:`lab.decode.generate`) gives after its prefill, i.e. the whole prompt and the first new token that
        the prefill's last position gave. Drop any state of the last generation; a draft model prefills its KV
        cache with every token but the last (the newest committed token, which the first proposal feeds)."""

    def propose(self, request: DraftRequest) -> Draft:
        """Draft at most ``request.max_tokens`` tokens after ``request.tokens`` (an empty Draft = a plain
        autoregressive step). Sampling drafters draw with ``request.generator`` at the target's settings."""

    def update(self, num_accepted: int, next_token: int) -> None:
        """Roll the drafter's own state back to the committed prefix: the first ``num_accepted`` drafts of the
        last proposal were accepted, then the target added ``next_token``. On the generation's last step, when an
        EOS among the accepted drafts (or ``max_new_tokens``) cut the step short, the loop reports what it committed
        instead: the drafts before the cut's last token as accepted, and that token (a draft) as ``next_token``
        (:func:`lab.decode.hand_over`)."""

    # Optional: ``observe(output: TargetOutput)`` receives the step's target logits (and hidden states, if the
    # drafter sets ``needs_hidden_states = True``) after verification, before ``update``. A drafter with
    # ``needs_hidden_states`` is reset with ``reset(prompt_ids, hidden=...)``: the target's hidden states
    # ``[len(prompt_ids) - 1, D]`` for every token of ``prompt_ids`` but the last, i.e. the prefill's, over the whole
    # prompt (``prompt_ids`` ends with the first new token, which no target forward has fed yet: the first decode
    # step feeds it, as every step feeds the newest committed token). ``kv_length()`` returns the
    # drafter's own KV-cache length when its slot i holds committed token i, as a draft model's does (recorded for
    # the KV-cache viewer, lesson 07); a drafter whose cache holds something else leaves it out.


def draft_token(logits: torch.Tensor, request: DraftRequest) -> tuple:
    """Choose one draft token from draft ``logits [V]``: the argmax when ``request.temperature`` is 0 (returns
    ``(token, None)``: verified as one-hot), else a draw from the distribution the target also uses
    (``lab.sampling.probs_from_logits`` with the request's temperature, top-k, top-p) with ``request.generator``
    (returns ``(token, probs)``, probs float32 ``[V]`` on the CPU, for rejection sampling)."""
    from lab.sampling import probs_from_logits

    if request.temperature == 0:
        return int(logits.argmax()), None
    probs = probs_from_logits(logits, request.temperature, request.top_k, request.top_p).cpu()
    return int(torch.multinomial(probs, 1, generator=request.generator)), probs


def check_pair(pair, where: str) -> None:
    """Raise ``TypeError`` unless ``pair`` looks like a :class:`lab.models.ModelPair` (its ``target`` a causal
    LM); ``where`` names the caller in the message. Duck-typed so a test's stand-in pair also passes."""
    if callable(getattr(getattr(pair, "target", None), "get_output_embeddings", None)):
        return
    hint = " (pass the pair itself, not pair.target)" if callable(getattr(pair, "get_output_embeddings", None)) else ""
    raise TypeError(f"{where} expected a ModelPair (lab.models.load_pair(...)) as pair, got {type(pair).__name__}"
                    f"{' ' + repr(pair) if isinstance(pair, str) else ''}{hint}")
