"""Suffix decoding: draft a token tree from suffix trees over this request's text and earlier requests' outputs.

No draft model. Two tries of counted substrings (each a suffix tree cut at ``max_depth`` tokens) remember text:
one over the current request (prompt and tokens generated so far), one over the outputs of earlier requests
(:class:`SuffixCache`, shared across requests, evicted first in, first out). Each step the drafter looks for the
suffixes of the context (the *patterns*) that occurred before with a continuation, in either trie, grows a
speculation tree from each pattern's node by empirical frequency and keeps the tree with the highest score (the
expected number of accepted tokens under those frequencies): the most probable continuations first, each
node's probability the product of its path's child frequencies, nodes below ``min_token_prob`` left out. The tree's
size adapts to the evidence: at most ``max_spec_factor`` × the pattern's length tokens, and pattern plus tree never
deeper than ``max_depth``. The drafter is deterministic, so verification treats every node as one-hot and the output
stays exactly the target's (greedy and sampled).

Sources: Oliaro et al., "SuffixDecoding: Extreme Speculative Decoding for Emerging AI Applications" (arXiv
2411.04975), §3 (global and per-request suffix trees, pattern matching, frequency-scored speculation trees, the
adaptive speculation length) — up to 5.3× on agentic SQL workloads there. Settings and defaults as vLLM's
``SpeculativeConfig`` (``method="suffix"``, via Arctic Inference): ``suffix_decoding_max_tree_depth`` 24,
``suffix_decoding_max_cached_requests`` 10000, ``suffix_decoding_max_spec_factor`` 1.0,
``suffix_decoding_min_token_prob`` 0.1. (vLLM 0.34.0's GPU suffix speculator drafts ``num_speculative_tokens`` every
step and keeps the last two only as deprecated keys with no effect, ``tests/data/engines/vllm-0.34.0/vllm/config/
speculative.py``; this module keeps the paper's adaptive rule.) Arctic Inference, through which vLLM ran this
method before, drafts one path by default, not a tree (``tree=False`` here, :func:`speculation_path`).
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from numbers import Real

from lab.drafters.base import Draft, DraftRequest, TargetOutput, check_request
from lab.validation import check_int, check_unbounded_ids, is_integer

__all__ = ["SuffixTree", "SuffixCache", "SuffixDecodingDrafter", "speculation_tree", "speculation_path",
           "quoted_outputs"]


class _Node:
    __slots__ = ("children", "count", "depth")

    def __init__(self, depth: int):
        self.children: dict = {}
        self.count = 0
        self.depth = depth


def _check_int(name: str, value, low: int) -> int:
    if not is_integer(value) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class SuffixTree:
    """Every substring of at most ``max_depth`` tokens of the sequences added, counted, as a trie: the node of a
    token path holds how often that path occurred. Built incrementally: :meth:`extend` appends tokens to the
    sequence being written (O(``max_depth``) per token); :meth:`add` / :meth:`remove` count a whole sequence in or
    out. Raises ``ValueError`` for ``max_depth`` < 2."""

    def __init__(self, max_depth: int = 24):
        self.max_depth = _check_int("max_depth", max_depth, 2)
        self.root = _Node(0)
        self._open: list = []  # the nodes of the suffixes (shorter than max_depth) that end at the last token

    def extend(self, tokens) -> None:
        """Append ``tokens`` (ints) to the sequence being written: count every substring that ends at them."""
        for token in tokens:
            if type(token) is not int:  # NumPy / 0-d tensor integers; a float is refused, not truncated
                if not is_integer(token):
                    raise ValueError(f"tokens must hold integer token ids, got {token!r}")
                token = int(token)
            grown = []
            for node in [self.root] + self._open:
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = _Node(node.depth + 1)
                child.count += 1
                if child.depth < self.max_depth:
                    grown.append(child)
            self._open = grown

    def close(self) -> None:
        """End the sequence being written: the next :meth:`extend` starts a new one (no substring spans both)."""
        self._open = []

    def add(self, tokens) -> None:
        """Count the whole sequence ``tokens`` in (as a separate sequence)."""
        self.close()
        self.extend(tokens)
        self.close()

    def remove(self, tokens) -> None:
        """Count a sequence :meth:`add` counted in out again, dropping paths whose count reaches 0."""
        tokens = _token_list("tokens", tokens)
        if any(self._find(tokens[start:start + self.max_depth]) is None for start in range(len(tokens))):
            raise ValueError("remove() got a sequence that was never added")  # checked first: nothing counted out
        for start in range(len(tokens)):
            node, path = self.root, []
            for token in tokens[start:start + self.max_depth]:
                child = node.children[token]
                path.append((node, token, child))
                node = child
            for parent, token, child in reversed(path):
                child.count -= 1
                if child.count <= 0 and not child.children:
                    del parent.children[token]

    def count(self, path) -> int:
        """How often ``path`` (token ids, at most ``max_depth`` of them) occurred; 0 if never."""
        node = self._find(_token_list("path", path))
        return 0 if node is None else node.count

    def _find(self, path):
        node = self.root
        for token in path:
            node = node.children.get(int(token))
            if node is None:
                return None
        return node

    def matches(self, context, longest: int) -> list:
        """``[(node, length), ...]`` for every suffix of ``context`` of at most ``longest`` tokens that occurred
        with at least one continuation, longest first."""
        found = []
        for length in range(min(longest, len(context)), 0, -1):
            node = self._find(context[len(context) - length:])
            if node is not None and node.children:
                found.append((node, length))
        return found

    def match(self, context, longest: int):
        """``(node, length)`` for the longest suffix of ``context`` (at most ``longest`` tokens) that occurred with
        at least one continuation; ``(None, 0)`` if none did."""
        found = self.matches(context, longest)
        return found[0] if found else (None, 0)


_ROUNDING = 1e-12  # how far below min_prob a path probability may round and still count as at it


def speculation_tree(node, budget: int, depth_room: int, min_prob: float) -> tuple:
    """The speculation tree below ``node`` (a trie node: ``.children`` maps token -> node, ``.count`` how often its
    path occurred): ``(tokens, parents, score)`` with at most ``budget`` nodes of depth at most ``depth_room``,
    best first by path probability (product of child frequencies, each child's count over its siblings' total),
    none below ``min_prob``, ties in the order the children were found; ``parents[i]`` = the index of node i's
    parent in ``tokens``, -1 for a child of ``node``. ``score`` = the sum of the nodes' path probabilities (the
    expected number of accepted tokens if the frequencies were the target's probabilities). Oliaro et al. 2024,
    §3 (greedy expansion by empirical probability); lesson 08's exercise. The siblings' total is the paper's rule;
    the authors' library, Arctic Inference, divides by the parent's own count instead (``SuffixTree::
    _speculate_tree``), which also counts the occurrences that end at the parent, so its probabilities are lower
    wherever continuations end and ``min_prob`` leaves out more nodes."""
    tokens, parents, score = [], [], 0.0
    heap, tie = [], 0

    def push(parent_node, parent_index, parent_prob, level):
        nonlocal tie
        if level > depth_room:
            return
        total = sum(c.count for c in parent_node.children.values())
        for token, child in parent_node.children.items():
            prob = parent_prob * child.count / total
            # A tolerance of 1e-12: a path probability exactly at min_prob (0.7 x 1/7 = 0.1) can round a hair below
            # it, and whether it does depends on the order of the multiplications; it stays.
            if prob >= min_prob - _ROUNDING:
                tie += 1
                heapq.heappush(heap, (-prob, tie, token, child, parent_index, level))

    push(node, -1, 1.0, 1)
    while heap and len(tokens) < budget:
        neg, _, token, child, parent_index, level = heapq.heappop(heap)
        tokens.append(token)
        parents.append(parent_index)
        score += -neg
        if child.children:
            push(child, len(tokens) - 1, -neg, level + 1)
    return tokens, parents, score


def speculation_path(node, budget: int, depth_room: int, min_prob: float) -> tuple:
    """The most probable single path below ``node``, as :func:`speculation_tree` returns a tree: ``(tokens, parents,
    score)``, each step to the child with the highest count (the first found on a tie), its probability the product of
    the path's child frequencies (count over the siblings' total), stopping at ``budget`` tokens, ``depth_room``
    levels, a leaf, or a probability below ``min_prob``; ``parents`` = ``[-1, 0, 1, ...]``. This is the default of
    the paper's authors' library, Arctic Inference (``SuffixDecodingCache.speculate(..., use_tree_spec=False)``), and
    what vLLM drafted while its suffix method called that library (``vllm/v1/spec_decode/suffix_decoding.py``, whose
    verifier checks chains; the file is not in the 0.34.0 wheel, whose GPU speculator continues the longest match for
    ``num_speculative_tokens`` tokens). One difference: Arctic Inference divides a child's count by its parent's,
    which also counts the occurrences that end there (the context's own among them), so its probabilities are
    lower."""
    tokens, parents, score, prob = [], [], 0.0, 1.0
    while len(tokens) < budget and len(tokens) < depth_room and node.children:
        total = sum(child.count for child in node.children.values())
        token, child = max(node.children.items(), key=lambda item: item[1].count)
        prob *= child.count / total
        if prob < min_prob - _ROUNDING:  # as in speculation_tree: one exactly at min_prob stays, however it rounds
            break
        parents.append(len(tokens) - 1)
        tokens.append(token)
        score += prob
        node = child
    return tokens, parents, score


def _token_list(name: str, tokens) -> list:
    """``tokens`` as a list of Python ints, each a token id >= 0; ``ValueError`` naming ``name`` otherwise."""
    try:
        items = list(tokens)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of token ids, got {type(tokens).__name__}") from None
    for t in items:
        if not is_integer(t) or t < 0:
            raise ValueError(f"{name} must hold token ids (integers >= 0), got {t!r}")
    return [int(t) for t in items]


def _is_chain(draft: Draft) -> bool:
    """True when ``draft`` is a chain (``parents`` None or ``[-1, 0, 1, ...]``): verification accepts a prefix."""
    return draft.parents is None or list(draft.parents) == list(range(-1, len(draft.tokens) - 1))


def quoted_outputs(prompt_outputs, prompt_ids: list) -> list:
    """What a drafter's ``prompt_outputs`` callable names for ``prompt_ids``: the earlier outputs a prompt quotes, as
    lists of token ids (``[]`` when ``prompt_outputs`` is None). Raises ``ValueError`` naming ``prompt_outputs`` when
    it returns something other than a list of token lists."""
    if prompt_outputs is None:
        return []
    quoted = prompt_outputs(prompt_ids)
    if isinstance(quoted, (str, bytes)) or not hasattr(quoted, "__iter__"):
        raise ValueError(f"prompt_outputs must return a list of token lists, got {type(quoted).__name__}")
    return [_token_list(f"prompt_outputs(...)[{i}]", output) for i, output in enumerate(quoted)]


class SuffixCache:
    """The global suffix tree over earlier requests' outputs, shared by the drafters given it (an engine keeps one):
    :meth:`add` counts an output in; beyond ``max_cached_requests`` outputs the oldest is counted out again (first
    in, first out). ``max_cached_requests`` = 0 keeps nothing (only the per-request trees then speculate).
    Raises ``ValueError`` for ``max_depth`` < 2 or ``max_cached_requests`` < 0."""

    def __init__(self, max_depth: int = 24, max_cached_requests: int = 10000):
        self.tree = SuffixTree(max_depth)
        self.max_cached_requests = _check_int("max_cached_requests", max_cached_requests, 0)
        self._outputs: deque = deque()
        self._held: dict = {}  # output (a tuple) -> how many copies the cache holds

    def __len__(self) -> int:
        return len(self._outputs)

    def __contains__(self, output) -> bool:
        try:
            return self._held.get(tuple(_token_list("output", output)), 0) > 0
        except ValueError:  # not token ids (2.7 used to match token 2): not in the cache
            return False

    def add(self, output) -> None:
        """Remember one finished request's generated tokens (the prompt is not cached: it is the user's): token ids,
        integers >= 0. Raises ``ValueError`` naming ``output`` for anything else."""
        self._add(_token_list("output", output))

    def _add(self, output: list) -> None:
        """:meth:`add` for a checked list of ints."""
        if not output or self.max_cached_requests == 0:
            return
        self.tree.add(output)
        self._outputs.append(output)
        self._held[tuple(output)] = self._held.get(tuple(output), 0) + 1
        while len(self._outputs) > self.max_cached_requests:
            oldest = self._outputs.popleft()
            self.tree.remove(oldest)
            self._held[tuple(oldest)] -= 1

    def add_once(self, output) -> bool:
        """:meth:`add` ``output`` unless an identical output is cached already (a conversation's earlier answer,
        quoted again by each later request); True if it was added."""
        output = _token_list("output", output)
        if not output or output in self:
            return False
        self._add(output)
        return output in self


class SuffixDecodingDrafter:
    """Suffix decoding behind the drafter protocol (see the module docstring; lesson 08's prompt lookup is the
    one-trie, one-chain special case).

    - ``cache``: the :class:`SuffixCache` of earlier outputs to read and add to (None: a private one). A drafter
      adds its request's output (every new token, the prefill's first one included) to the cache when the next
      generation starts (:meth:`reset`) or on :meth:`finish`, so reuse one drafter across requests, or share a
      cache between drafters and call :meth:`finish`.
    - ``max_depth`` (≥ 2): the tries' depth, which bounds pattern length + speculation depth (vLLM's
      ``suffix_decoding_max_tree_depth``). ``max_spec_factor`` (> 0): at most this × the pattern's length nodes per
      step. ``min_token_prob`` (0 to 1): nodes whose path probability is lower are not drafted.
      ``max_spec_tokens`` (≥ 1): a cap on the nodes per step whatever the pattern (default ``max_depth``).
    - ``tree``: True (the paper's form) drafts a speculation tree (:func:`speculation_tree`); False the single most
      probable path (:func:`speculation_path`), Arctic Inference's default (``use_tree_spec=False``).
    - ``prompt_outputs``: None, or a callable ``prompt_ids -> [token list, ...]`` naming the earlier outputs a
      prompt quotes (a conversation's earlier assistant turns, :func:`lab.prompts.assistant_turns`): :meth:`reset`
      counts each into the cache once (:meth:`SuffixCache.add_once`), as the server that generated them would
      have cached them, so a drafter built fresh for one request of a conversation sees what a long-running one
      would.

    Each proposal is a token tree (``Draft.parents``; a chain when only one continuation was ever seen, or with
    ``tree=False``), with no
    draft probabilities (deterministic: verified as one-hot) and no draft forward pass. ``history`` records, per
    step, which trie the pattern came from ("request", "cache", None when neither matched, or "no room" when the
    step could take no draft: the last token before ``max_new_tokens``), the pattern's length and the tree's size.
    Raises ``ValueError`` naming the argument for an out-of-range setting."""

    def __init__(self, cache: SuffixCache | None = None, max_depth: int = 24, max_spec_factor: float = 1.0,
                 min_token_prob: float = 0.1, max_spec_tokens: int | None = None, prompt_outputs=None,
                 tree: bool = True):
        self.max_depth = _check_int("max_depth", max_depth, 2)
        if (not isinstance(max_spec_factor, Real) or isinstance(max_spec_factor, bool) or not max_spec_factor > 0
                or not math.isfinite(max_spec_factor)):
            raise ValueError(f"max_spec_factor must be a finite number > 0, got {max_spec_factor!r}")
        if not isinstance(min_token_prob, Real) or isinstance(min_token_prob, bool) or not 0 <= min_token_prob <= 1:
            raise ValueError(f"min_token_prob must be a number from 0 to 1, got {min_token_prob!r}")
        if not isinstance(tree, bool):
            raise ValueError(f"tree must be True (a speculation tree) or False (one path), got {tree!r}")
        self.tree = tree
        self.max_spec_factor = float(max_spec_factor)
        self.min_token_prob = float(min_token_prob)
        self.max_spec_tokens = self.max_depth if max_spec_tokens is None else _check_int("max_spec_tokens",
                                                                                         max_spec_tokens, 1)
        if cache is not None and not isinstance(cache, SuffixCache):
            raise ValueError(f"cache must be a SuffixCache or None, got {type(cache).__name__}")
        self.cache = SuffixCache(self.max_depth) if cache is None else cache
        if prompt_outputs is not None and not callable(prompt_outputs):
            raise ValueError(f"prompt_outputs must be None or a callable prompt_ids -> token lists, got "
                             f"{type(prompt_outputs).__name__}")
        self.prompt_outputs = prompt_outputs
        self._request = SuffixTree(self.max_depth)
        self._prompt_length = None
        self._tokens: list = []
        self._last: Draft | None = None
        self._path: list | None = None  # the accepted drafts observe recorded; None: the step was not observed
        self.history: list = []

    def reset(self, prompt_ids) -> None:
        """Start a generation from ``prompt_ids``, the committed tokens the decode loop resets drafters with: the
        prompt and the first new token, which the prefill gave. The last generation's output goes into the cache,
        the per-request trie starts over with these tokens (and the outputs they quote, given ``prompt_outputs``,
        join the cache), and the new output starts at their last token: the first new token is part of the answer
        the cache will hold, not of the prompt. Raises ``TypeError`` naming ``prompt_ids`` for text or ids that are
        not integers (a float is not truncated), ``ValueError`` for a negative id."""
        prompt_ids = check_unbounded_ids("prompt_ids", prompt_ids)  # before finish: a bad call changes nothing
        self.finish()
        self._tokens = prompt_ids
        for output in quoted_outputs(self.prompt_outputs, self._tokens):
            if len(output) > 1:  # one token holds no continuation (see finish)
                self.cache.add_once(output)
        self._prompt_length = max(len(self._tokens) - 1, 0)
        self._request = SuffixTree(self.max_depth)
        self._request.extend(self._tokens)
        self._last, self._path, self.history = None, None, []

    def finish(self) -> None:
        """Add the current generation's output to the cache (once; :meth:`reset` calls it too): its tokens from the
        last one :meth:`reset` received on. An output of one token (a generation that ended with the prefill's
        token, or a reset with no step after it) is left out: a one-token sequence gives no pattern a continuation,
        so it could change no proposal, and it would only take a place in the cache (and evict an older output)."""
        if self._prompt_length is not None:
            output = self._tokens[self._prompt_length:]
            if len(output) > 1:
                self.cache.add(output)
        self._prompt_length = None

    def propose(self, request: DraftRequest) -> Draft:
        """The best-scoring speculation tree (with ``tree=False``: path) over both tries and every pattern length
        with a continuation (the longest pattern and the request's trie win ties). Raises ``TypeError`` /
        ``ValueError`` naming ``request.tokens`` when they are not token ids (integers >= 0)."""
        check_request(request)
        self._sync(request.tokens)
        self._path = None  # a new draft: its accepted nodes are not known yet
        budget_cap = min(self.max_spec_tokens, request.max_tokens)
        grow = speculation_tree if self.tree else speculation_path
        best = None
        if budget_cap > 0:
            for source, trie in (("request", self._request), ("cache", self.cache.tree)):
                # every pattern length: a long pattern is strong evidence but leaves the tree little depth
                for node, length in trie.matches(self._tokens, self.max_depth - 1):
                    budget = min(budget_cap, int(self.max_spec_factor * length))
                    room = min(self.max_depth - length, request.max_tokens)
                    tokens, parents, score = grow(node, budget, room, self.min_token_prob)
                    if tokens and (best is None or score > best[0]):
                        best = (score, source, length, tokens, parents)
        if best is None:  # "no room": one token left, which the target's own token fills; None: no match
            self.history.append({"source": None if budget_cap > 0 else "no room", "pattern": 0, "nodes": 0})
            self._last = Draft()
            return self._last
        _, source, length, tokens, parents = best
        self.history.append({"source": source, "pattern": length, "nodes": len(tokens)})
        self._last = Draft(tokens=tokens, parents=parents)
        return self._last

    def observe(self, output: TargetOutput) -> None:
        """Remember which drafted nodes the target accepted: ``output.path`` is row 0 (the last committed token)
        and then the rows ``1 + node index`` of the accepted nodes, a root-to-leaf path of the last draft. Raises
        ``ValueError`` for a path that does not start at row 0, names a row that was not drafted, or does not
        follow the draft's tree (each node a child of the one before it)."""
        drafted = self._last if self._last is not None else Draft()
        parents = drafted.parents if drafted.parents is not None else list(range(-1, len(drafted.tokens) - 1))
        path = list(output.path)
        if not path or not all(is_integer(r) for r in path) or path[0] != 0:
            raise ValueError(f"output.path must be row 0 and then rows of accepted draft nodes, got {path}")
        nodes = [int(r) - 1 for r in path[1:]]
        if any(not 0 <= node < len(drafted.tokens) or parents[node] != (nodes[i - 1] if i else -1)
               for i, node in enumerate(nodes)):
            raise ValueError(f"output.path must follow one root-to-leaf path of the last draft ({len(drafted.tokens)} "
                             f"nodes, parents {parents}), got {path}")
        self._path = [drafted.tokens[node] for node in nodes]

    def update(self, num_accepted: int, next_token: int) -> None:
        """Append the accepted drafts and the target's token to the request's text and trie. The accepted drafts
        are the first ``num_accepted`` nodes of the path :meth:`observe` recorded; without ``observe`` (optional in
        the drafter protocol), the first ``num_accepted`` tokens of a chain draft (verification accepts a chain's
        prefix). Raises ``ValueError`` for ``num_accepted`` outside ``[0, the observed path's length]`` (without
        ``observe``: ``[0, drafted tokens]``), for accepted nodes of a tree draft that was not observed (which of its
        branches was accepted is known only from ``output.path``), or for a ``next_token`` that is not an integer
        >= 0."""
        drafted = self._last.tokens if self._last is not None else []
        if self._path is not None:
            num_accepted = check_int(f"num_accepted (the observed path holds {len(self._path)} accepted drafts)",
                                     num_accepted, 0, len(self._path))
            accepted = self._path[:num_accepted]
        else:
            num_accepted = check_int(f"num_accepted (the last draft holds {len(drafted)} tokens)", num_accepted, 0,
                                     len(drafted))
            if num_accepted and not _is_chain(self._last):
                raise ValueError(f"{type(self).__name__}.update got num_accepted = {num_accepted} for a tree draft "
                                 "that was not observed: which nodes were accepted is known only from observe(output) "
                                 "(output.path); call observe before update, as lab.decode.hand_over does")
            accepted = drafted[:num_accepted]
        next_token = check_int("next_token", next_token, 0)
        self._last, self._path = None, None  # used: a second update before the next propose accepts nothing
        self._append(accepted + [next_token])

    def _append(self, tokens) -> None:
        self._tokens.extend(tokens)
        self._request.extend(tokens)

    def _sync(self, tokens) -> None:
        """Catch up with the loop's committed tokens (a caller that proposes without the decode loop's updates)."""
        tokens = check_unbounded_ids("request.tokens", tokens)
        if len(tokens) > len(self._tokens) and tokens[: len(self._tokens)] == self._tokens:
            self._append(tokens[len(self._tokens):])
        elif tokens != self._tokens:
            self._prompt_length = None  # not this generation's text: start over without caching it
            self.reset(tokens)
