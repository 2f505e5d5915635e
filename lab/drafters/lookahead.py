"""Jacobi iteration and Lookahead decoding: the target drafts for itself, with no draft model.

**Jacobi iteration.** Greedy decoding of W tokens solves W equations x_i = argmax target(x_<i) one after another.
Jacobi iteration solves them all at once: guess the W tokens, run the target once over prefix + guesses, replace
every guess with the target's argmax at its position, and repeat. Position i is right as soon as positions < i are
right, so after at most W iterations the window stops changing, and its fixed point is exactly the greedy
continuation (:func:`jacobi_update`, :func:`jacobi_decode`).

**Lookahead decoding** (Fu, Bailis, Stoica & Zhang 2024, "Break the Sequential Dependency of LLM Inference Using
Lookahead Decoding", sections 3.1–3.3) rarely gets more than one token per Jacobi iteration from the window
itself; instead it keeps the Jacobi *trajectory* (the windows of the last iterations) and collects n-grams from
it: the token a position received in this iteration, preceded by the guesses one position earlier in the previous
iterations, is a plausible n-gram. A pool maps each n-gram's first token to its continuations. Each decoding step
runs one target forward that holds two branches:

- the *lookahead branch*: the current window, attending to the committed sequence and to the window tokens
  before it — one Jacobi iteration;
- the *verification branch*: a pooled n-gram that starts with the last committed token, verified as an ordinary
  draft chain (greedy match, or one-hot rejection sampling), so the output is exactly the target's.

:class:`LookaheadDrafter` plugs into the shared decode loop (:func:`lab.decode.generate`): it returns the chosen
n-gram as ``Draft.tokens`` and the window as ``Draft.extra_tokens`` with an attention mask and position ids, the
loop runs both branches in **one** target forward (a custom attention mask over the new tokens, checked to give
the same logits as separate causal forwards) and hands all logits back through ``observe``. Two differences from
the paper, both stated in lesson 09: we verify one pooled n-gram per step, not up to G of them (the shared loop
verifies a chain; several candidates need the tree verification of lesson 10), and we keep one window level in the
forward instead of the paper's n − 1 levels, taking the older levels from memory. (The paper calls the n-gram size
N; in this course N is the draft length, so the n-gram size is n, the ``ngram`` argument.) When the pool holds no n-gram
for the last token, the window itself is verified as the chain: plain Jacobi decoding.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from lab.drafters.base import Draft, DraftRequest, check_request
from lab.kv import rollback
from lab.models import forward, new_cache
from lab.validation import MAX_LENGTH, check_int, check_token_ids, check_unbounded_ids, is_integer, plain_number

__all__ = ["LookaheadDrafter", "JacobiRun", "jacobi_update", "jacobi_decode", "converged_prefix"]


def _check_int(name: str, value, low: int) -> int:
    if not is_integer(value) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------------------------------------------
# Jacobi iteration on its own (lesson 09, part 1)

def jacobi_update(target, prefix_ids, window) -> list:
    """One Jacobi iteration: every guess in ``window`` replaced by the target's greedy prediction at its position.

    ``prefix_ids``: the committed tokens (list[int], at least one). ``window``: W guessed token ids for the
    positions right after the prefix. The target runs once over ``prefix_ids + window``; the new guess for window
    position i is the argmax of the logits at position ``len(prefix_ids) - 1 + i`` (the row that predicts it), so
    it depends on the prefix and on the *old* guesses 0..i−1. Returns list[int] of length W. Raises
    ``ValueError`` for an empty prefix or window, ``TypeError`` for ids that are not integers (text, floats), and
    ``ValueError`` (from :func:`lab.models.forward`) for ids outside the vocabulary or past the context.
    """
    prefix = check_token_ids("prefix_ids", prefix_ids, hint="; encode text first: pair.encode(text)")
    window = check_token_ids("window", window)
    logits = forward(target, prefix + window, new_cache())
    start = len(prefix) - 1
    return logits[start:start + len(window)].argmax(-1).tolist()


def converged_prefix(window, fixed_point) -> int:
    """How many leading tokens of ``window`` already equal the ``fixed_point`` (the greedy continuation).

    Jacobi iteration never changes these again: each one was predicted from a prefix that is already right.
    Returns an int in ``[0, len(window)]``."""
    count = 0
    for guess, final in zip(window, fixed_point):
        if guess != final:
            break
        count += 1
    return count


@dataclass
class JacobiRun:
    """Jacobi iteration on one window: ``iterations[0]`` is the initial guess, ``iterations[t]`` the window after t
    updates; ``fixed_point`` the last window (= the greedy continuation once ``converged``); ``converged_counts[t]``
    the converged prefix of ``iterations[t]`` (:func:`converged_prefix`), and an empty list when the run stopped at
    ``max_iterations`` before converging (there is no fixed point to compare with); ``target_calls`` = updates run.

    A run is checked when built (:func:`jacobi_decode` builds it right; a hand-built one, as a lesson or test makes,
    is not trusted): ``TypeError`` / ``ValueError`` naming the field for ids that are not integers >= 0, no
    iterations, a window of another length than ``fixed_point``, a ``converged`` that is not a bool (NumPy's
    counts), a run whose last window is not its ``fixed_point``, and ``converged_counts`` that are not the converged
    prefixes (filled in when a converged run leaves them out) or not empty for a run that did not converge."""

    prompt: list
    iterations: list
    fixed_point: list
    converged: bool
    converged_counts: list = field(default_factory=list)

    def __post_init__(self):
        # JacobiViewer trusts these; jacobi_decode builds them right, a hand-built run is checked here
        self.prompt = check_token_ids("JacobiRun prompt", self.prompt)
        self.fixed_point = check_token_ids("JacobiRun fixed_point", self.fixed_point)
        if isinstance(self.iterations, (str, bytes, dict, set)) or not hasattr(self.iterations, "__iter__"):
            raise TypeError(f"JacobiRun iterations must be a list of windows (lists of token ids), got "
                            f"{type(self.iterations).__name__}")
        rows = [check_token_ids(f"JacobiRun iterations[{t}]", row) for t, row in enumerate(self.iterations)]
        if not rows:
            raise ValueError("JacobiRun iterations must hold at least the initial guess")
        ragged = next((t for t, row in enumerate(rows) if len(row) != len(self.fixed_point)), None)
        if ragged is not None:
            raise ValueError(f"JacobiRun iterations[{ragged}] holds {len(rows[ragged])} tokens, but every window "
                             f"holds W = {len(self.fixed_point)} (the fixed point's length)")
        self.iterations = rows
        if not (isinstance(self.converged, bool)
                or getattr(getattr(self.converged, "dtype", None), "kind", "") == "b"):  # NumPy's bool counts
            raise TypeError(f"JacobiRun converged must be True or False, got {self.converged!r}")
        self.converged = bool(self.converged)
        if rows[-1] != self.fixed_point:  # converged or not, fixed_point is the last window
            raise ValueError("a JacobiRun ends at its fixed point (the last window): iterations[-1] must equal "
                             "fixed_point")
        if isinstance(self.converged_counts, (str, bytes, dict, set)) or not hasattr(self.converged_counts,
                                                                                     "__iter__"):
            raise TypeError(f"JacobiRun converged_counts must be a list of ints, got "
                            f"{type(self.converged_counts).__name__}")
        counts = [converged_prefix(w, self.fixed_point) for w in rows]
        if self.converged and not list(self.converged_counts):  # left out: filled in, as a default path is
            self.converged_counts = counts
        if self.converged and list(self.converged_counts) != counts:
            raise ValueError("JacobiRun converged_counts must be converged_prefix(window, fixed_point) for every "
                             "window of iterations (lab.drafters.lookahead.converged_prefix)")
        if not self.converged and list(self.converged_counts):
            raise ValueError("JacobiRun converged_counts must be empty when the run did not converge (there is no "
                             "fixed point to compare with)")
        self.converged_counts = list(self.converged_counts)

    @property
    def target_calls(self) -> int:
        """Target forwards the Jacobi iteration took (the first row of ``iterations`` is the initial guess)."""
        return len(self.iterations) - 1

    @property
    def window(self) -> int:
        """Tokens solved in parallel: the length of the fixed point."""
        return len(self.fixed_point)


def jacobi_decode(target, prompt_ids, window: int = 8, init=None, max_iterations: int | None = None,
                  seed: int = 0) -> JacobiRun:
    """Run Jacobi iteration on ``window`` future tokens until the window stops changing (or ``max_iterations``).

    ``init``: the initial guesses (list of ``window`` ids); default: tokens drawn from the prompt with
    ``random.Random(seed)``. Each iteration is one target forward over the window (the prompt is prefilled into a
    KV cache once and rolled back after every iteration). The loop stops after the first update that changes
    nothing; at most ``window`` updates are needed for that, plus the one that confirms it, so the default
    ``max_iterations`` is ``window + 1``. Source: Santilli et al. 2023 (Jacobi decoding); Fu et al. 2024, sec. 2.

    Returns :class:`JacobiRun`. Raises ``ValueError`` for an empty prompt, ``window`` outside [1,
    :data:`lab.validation.MAX_LENGTH`] (the target's context then bounds it further), ``init`` of the wrong
    length, ``max_iterations`` < 1 or a ``seed`` that is not an integer >= 0 (NumPy integers count), and
    ``TypeError`` for ``prompt_ids`` or ``init`` that are not integer token ids.
    """
    prompt = check_token_ids("prompt_ids", prompt_ids, hint="; encode text first: pair.encode(text)")
    window = check_int("window", plain_number(window), 1, MAX_LENGTH)  # 10**9 hung building its guesses
    seed = check_int("seed", seed, 0)  # random.Random rejects NumPy ints and hashes floats
    if init is None:
        rng = random.Random(seed)
        guesses = [rng.choice(prompt) for _ in range(window)]
    else:
        guesses = check_token_ids("init", init)
        if len(guesses) != window:
            raise ValueError(f"init must hold window = {window} token ids, got {len(guesses)}")
    limit = window + 1 if max_iterations is None else _check_int("max_iterations", max_iterations, 1)
    cache = new_cache()
    if len(prompt) > 1:
        forward(target, prompt[:-1], cache, logits_to_keep=1)
    base = len(prompt) - 1
    iterations, converged = [list(guesses)], False
    for _ in range(limit):
        logits = forward(target, [prompt[-1]] + guesses, cache)
        rollback(cache, base)
        updated = logits[:window].argmax(-1).tolist()
        iterations.append(updated)
        if updated == guesses:
            converged = True
            break
        guesses = updated
    fixed = iterations[-1]
    return JacobiRun(prompt, iterations, list(fixed), converged,
                     [converged_prefix(w, fixed) for w in iterations] if converged else [])


# --------------------------------------------------------------------------------------------------------------
# The Lookahead drafter (lesson 09, part 2)

class LookaheadDrafter:
    """Lookahead decoding (Fu et al. 2024) as a drafter for the shared decode loop: no draft model, no training.

    ``LookaheadDrafter(window=4, ngram=3, pool_size=8, seed=0)``:

    - ``window`` (W >= 1): Jacobi window, the future positions guessed and refined every step;
    - ``ngram`` (n >= 2): size of the n-grams collected from the Jacobi trajectory. An n-gram's first token is a
      key of the pool; its n − 1 further tokens (the continuation) are what gets proposed after the last committed
      token. n = 2 uses only the latest iteration;
    - ``pool_size`` (>= 1): continuations kept per first token (the oldest is dropped first);
    - ``seed`` (integer >= 0): the random generator that fills window positions with prompt tokens when no guess
      exists yet.

    Per step (see the module docstring): the verification branch is a pooled continuation of the last committed
    token — the most recent one whose first token equals the window's first guess, else the most recent one; the
    lookahead branch is the window. Both go into one target forward (``Draft.extra_tokens`` + mask). With no
    pooled n-gram the window itself is the chain (plain Jacobi decoding). ``Draft.calls`` is 0 (no draft model)
    and ``Draft.probs`` None (deterministic: verified as one-hot, so sampling stays exact).

    Kernel-side state for views and tests: ``pool`` (dict first token → list of continuations, oldest first),
    ``window_tokens`` (current guesses), ``history`` (one dict per step: ``position``, ``window``, ``chain``,
    ``source`` in ``"pool" | "jacobi" | "none"``, ``outputs``). Everything is cleared by ``reset``, so nothing leaks
    from one generation to the next. Raises ``ValueError`` for arguments out of range.
    """

    def __init__(self, window: int = 4, ngram: int = 3, pool_size: int = 8, seed: int = 0):
        self.window = _check_int("window", window, 1)
        self.ngram = _check_int("ngram", ngram, 2)
        self.pool_size = _check_int("pool_size", pool_size, 1)
        self.seed = check_int("seed", seed, 0)  # random.Random rejects NumPy ints and hashes floats
        self.pool: dict = {}
        self.window_tokens: list = []
        self.history: list = []
        self._levels: list = []   # fed windows of the last n − 1 iterations: dicts position → token
        self._rng = random.Random(self.seed)
        self._filler: list = [0]
        self._step: dict = {}

    # --- protocol -----------------------------------------------------------------------------------------------
    def reset(self, prompt_ids) -> None:
        """Forget the pool and the trajectory; start the window from random tokens of ``prompt_ids`` (the prompt
        and the prefill's first new token, from the decode loop; token 0 when empty). Raises ``TypeError`` naming
        ``prompt_ids`` for text or ids that are not integers (a float is not truncated), ``ValueError`` for a
        negative id."""
        prompt = check_unbounded_ids("prompt_ids", prompt_ids)
        self._rng = random.Random(self.seed)
        self._filler = prompt or [0]
        self.pool, self._levels, self.history = {}, [], []
        self.window_tokens = [self._rng.choice(self._filler) for _ in range(self.window)]
        self._step = {}

    def propose(self, request: DraftRequest) -> Draft:
        """Propose the pool's n-gram that continues the last token, with the Jacobi window riding along in the same
        target call as ``extra_tokens``; with no such n-gram the window itself is the draft (Fu et al. 2024,
        lesson 09). Deterministic (``probs`` None), ``calls`` 0. Raises ``RuntimeError`` before :meth:`reset`,
        ``ValueError`` for an empty ``request.tokens`` (the window follows the last committed token) and
        ``TypeError`` / ``ValueError`` naming ``request.tokens`` when they are not token ids (integers >= 0)."""
        check_request(request)
        if not self.window_tokens:
            raise RuntimeError("call reset(prompt_ids) before propose()")
        tokens = check_unbounded_ids("request.tokens", request.tokens)
        if not tokens:
            raise ValueError("request.tokens must hold at least one token (the last committed token, which the "
                             "window and the pooled n-gram follow), got []")
        position, last = len(tokens) - 1, tokens[-1]
        budget = max(0, request.max_tokens)
        candidate = self._choose(last)
        if budget == 0:
            chain, extra, source = [], [], "none"
        elif candidate:
            # the window rides along at offsets 1..W; guesses past the budget could never be used (and near the
            # end of the context would sit past it), so only the first `budget` go into the forward
            chain, extra, source = list(candidate[:budget]), list(self.window_tokens[:budget]), "pool"
        else:
            chain, extra, source = list(self.window_tokens[:budget]), [], "jacobi"
        self._step = {"position": position, "last": last, "chain": chain, "extra": extra, "source": source,
                      "window": list(self.window_tokens)}
        if not extra:
            return Draft(chain, None, calls=0)
        n, w = len(chain), len(extra)
        mask = torch.zeros(w, 1 + n + w, dtype=torch.bool)
        mask[:, 0] = True  # every window token sees the last committed token (and the cached prefix)
        mask[:, 1 + n:] = torch.ones(w, w, dtype=torch.bool).tril()  # and the window tokens up to itself
        return Draft(chain, None, calls=0, extra_tokens=extra, extra_positions=list(range(1, w + 1)),
                     extra_mask=mask)

    def observe(self, output) -> None:
        """Receive the step's :class:`~lab.drafters.base.TargetOutput`: its logits for every row of the forward
        (``[1 + n + extra, V]``) give the Jacobi update of the window and the n-grams of the trajectory."""
        step = self._step
        if not step:
            return
        argmax = output.logits.argmax(-1).tolist()
        position, n = step["position"], len(step["chain"])
        if step["source"] == "pool":
            window_rows = range(1 + n, 1 + n + len(step["extra"]))
            fed_window = step["extra"]
        else:  # "jacobi": the chain is the window; "none": only the last token was fed
            window_rows = range(1, 1 + n)
            fed_window = step["chain"]
        fed = {position: step["last"]}
        fed.update({position + 1 + i: token for i, token in enumerate(fed_window)})
        outputs = {position + 1: argmax[0]}
        outputs.update({position + 2 + i: argmax[row] for i, row in enumerate(window_rows)})
        self._levels = (self._levels + [fed])[-(self.ngram - 1):]
        self._collect(outputs)
        step["outputs"] = outputs

    def update(self, num_accepted: int, next_token: int) -> None:
        """Move the window past the ``num_accepted + 1`` newly committed tokens: its next guesses are this step's
        outputs at those positions (random filler where there are none); record the step in ``history``. Nothing to
        do when no proposal is pending. Raises ``ValueError`` for ``num_accepted`` outside ``[0, drafted tokens]``
        (0 with no proposal pending) or a ``next_token`` that is not an integer >= 0."""
        step = self._step
        drafted = len(step["chain"]) if step else 0
        num_accepted = check_int(f"num_accepted (the last draft holds {drafted} tokens)", num_accepted, 0, drafted)
        next_token = check_int("next_token", next_token, 0)
        if not step:
            return
        new_position = step["position"] + num_accepted + 1
        outputs = step.get("outputs", {})
        self.window_tokens = [outputs.get(new_position + 1 + i) for i in range(self.window)]
        self.window_tokens = [self._rng.choice(self._filler) if t is None else t for t in self.window_tokens]
        self.history.append({"position": step["position"], "window": step["window"], "chain": step["chain"],
                             "source": step["source"], "outputs": outputs, "num_accepted": num_accepted,
                             "next_token": next_token})
        self._step = {}

    # --- internals ------------------------------------------------------------------------------------------
    def _choose(self, last: int):
        """The pooled continuation of ``last`` to verify: agreeing with the window's first guess if one does,
        else the most recently collected; None if the pool has nothing for ``last``."""
        candidates = self.pool.get(last)
        if not candidates:
            return None
        guess = self.window_tokens[0] if self.window_tokens else None
        for continuation in reversed(candidates):
            if continuation[0] == guess:
                return continuation
        return candidates[-1]

    def _collect(self, outputs: dict) -> None:
        """Add every n-gram of the trajectory that ends in this iteration's outputs to the pool."""
        levels, size = self._levels, self.ngram
        if len(levels) < size - 1:
            return
        for end, token in outputs.items():
            gram = []
            for back, level in enumerate(levels):  # oldest level first: position end − (n − 1) + back
                at = end - (size - 1) + back
                if at not in level:
                    break
                gram.append(level[at])
            else:
                gram.append(token)
                self._add(gram[0], tuple(gram[1:]))

    def _add(self, first: int, continuation: tuple) -> None:
        entries = self.pool.setdefault(first, [])
        if continuation in entries:
            entries.remove(continuation)
        entries.append(continuation)
        if len(entries) > self.pool_size:
            del entries[0]

    def __repr__(self) -> str:
        return f"LookaheadDrafter(window={self.window}, ngram={self.ngram}, pool_size={self.pool_size})"
