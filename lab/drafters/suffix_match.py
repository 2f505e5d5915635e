"""Suffix decoding as vLLM 0.34 runs it on GPUs: continue the longest suffix match for a fixed number of tokens.

vLLM 0.34.0 dropped the paper's speculation trees (:mod:`lab.drafters.suffix`) for a GPU speculator that keeps the
two parts its authors credit with most of the gain, matching the longest suffix and remembering finished requests,
and drafts a chain of ``num_speculative_tokens`` every step (``vllm/v1/worker/gpu/spec_decode/suffix/
speculator.py``; the default N = min(8, ``suffix_decoding_max_tree_depth``) is in ``suffix/config.py`` there):

- **The request's own text** (prompt and output): the earlier position whose preceding tokens match the longest
  suffix of the text, at most ``max_depth`` tokens; the longest match wins, then the latest position. The draft is
  the N tokens that follow it (fewer near the end of the text). This is prompt lookup with n-grams up to
  ``max_depth`` (:func:`lab.drafters.prompt_lookup.ngram_lookup` with ``max_ngram=max_depth``).
- **A corpus of finished outputs** (:class:`SuffixCorpus`, shared across requests, oldest overwritten first), each
  stored with the last 3 prompt tokens before it (the chat template's assistant header). Outputs are numbered as they
  arrive, and an index keeps, per key (the 4 tokens before a position, and the 2 before it) and per slot (the
  output's number mod 8), the newest occurrence in the newest output of that slot: so a lookup of the text's last 4
  tokens, and of its last 2, finds at most 8 candidates each, and an output with a newer one of the same slot holding
  the key is shadowed. Each candidate is extended to its whole match length. For each match length L, the
  candidates that match at least L tokens vote token by token: the most frequent next token is drafted (a tie goes
  to the newest candidate) and the candidates that continue otherwise drop out. A chain scores the sum of its vote
  counts over the candidates it started with (the sum of the drafted tokens' empirical probabilities, as in the
  paper); the best score wins, a tie the longer L.
- The longer of the two matches drafts; a tie goes to the request's own text.

Four simplifications: vLLM finds corpus candidates through a hash index (collisions only cost a slot; here the index
is a dictionary keyed by the tokens themselves, so a lookup is exact); it pads a short draft to N with copies of the
last token and verifies them too (here the draft is only the tokens found); it can trim drafts by acceptance learned
online (``enable_adaptive_verification``, off by default; not here); and its corpus is a ring of
``suffix_decoding_corpus_tokens`` tokens that overwrites the oldest tokens, sometimes part of an output, where this
one drops whole outputs, oldest first, and forgets their index entries (the two differ only once the corpus is full:
2**20 tokens by default).

The draft is deterministic, so verification treats it as one-hot and the output is exactly the target's.
"""
from __future__ import annotations

from collections import deque

from lab.drafters.base import Draft, DraftRequest, check_request
from lab.drafters.suffix import quoted_outputs
from lab.validation import check_int, check_unbounded_ids

__all__ = ["SuffixCorpus", "SuffixMatchDrafter", "longest_match", "PROMPT_CONTEXT", "BUCKET_SLOTS"]

PROMPT_CONTEXT = 3
"""Prompt tokens stored ahead of each output in the corpus (vLLM 0.34's ``_PROMPT_CONTEXT``: the longest lookup
key, 4 tokens, less one), so that an output's first tokens can be found by what precedes them."""

BUCKET_SLOTS = 8
"""Index slots per key: an output's slot is its number mod 8, and a slot keeps the newest output of its class that
holds the key (vLLM 0.34's ``_BUCKET_SLOTS``; ``slot = doc_seq % SLOTS`` with ``atomic_max`` in its ingest kernel)."""

_KEY_LENGTHS = (4, 2)  # the corpus is looked up by the text's last 4 tokens and by its last 2


def _keyed_positions(document: list):
    """``(key, position)`` for every lookup key in ``document``: the :data:`_KEY_LENGTHS` tokens just before each
    position that has a next token, positions in increasing order."""
    for key in _KEY_LENGTHS:
        for position in range(key, len(document)):
            yield tuple(document[position - key:position]), position


def _match_length(text: list, end: int, tokens: list, max_depth: int) -> int:
    """How many tokens before ``text[end]`` equal the last tokens of ``tokens`` (at most ``max_depth``)."""
    length = 0
    while length < max_depth and length < end and length < len(tokens) and \
            text[end - 1 - length] == tokens[-1 - length]:
        length += 1
    return length


def longest_match(tokens, max_depth: int = 24) -> tuple:
    """``(length, position)``: the earlier position of ``tokens`` (a list of token ids) whose preceding tokens match
    the longest suffix of ``tokens``, at most ``max_depth`` of them; the latest such position on a tie. ``position``
    is where the continuation starts (``1 <= position < len(tokens)``, so at least one token follows); ``(0, None)``
    when no earlier token equals the last one. vLLM 0.34's local scan (``_suffix_local_scan_kernel``).

    Raises ``ValueError`` for ``max_depth`` < 1, ``TypeError`` or ``ValueError`` for ``tokens`` that are not token
    ids."""
    return _longest_match(check_unbounded_ids("tokens", tokens), check_int("max_depth", max_depth, 1))


def _longest_match(tokens: list, max_depth: int) -> tuple:
    """:func:`longest_match` on checked arguments (the drafter's own text, checked once per step)."""
    best = (0, None)
    for position in range(len(tokens) - 1, 0, -1):  # latest first: only a longer match replaces the best
        if tokens[position - 1] != tokens[-1]:
            continue
        length = _match_length(tokens, position, tokens, max_depth)
        if length > best[0]:
            best = (length, position)
            if length == max_depth:
                break
    return best


class SuffixCorpus:
    """Finished outputs for cross-request matching, oldest dropped first once they hold more than ``capacity``
    tokens (vLLM 0.34's ``suffix_decoding_corpus_tokens``, default 2**20, counting one separator per output);
    ``capacity`` = 0 keeps nothing. An output longer than the capacity keeps its newest ``capacity - 1`` tokens, as
    vLLM's ring does. The lookup index costs memory: about 0.8 KB per stored token in CPython (some 0.8 GB at the
    default capacity; the course's corpora hold a few thousand tokens), where vLLM's fixed-size hash table is
    bounded. Raises ``ValueError`` for a negative ``capacity``."""

    def __init__(self, capacity: int = 1 << 20):
        self.capacity = check_int("capacity", capacity, 0)
        self.documents: deque = deque()  # (sequence number, tokens), oldest first
        self._held: dict = {}  # sequence number -> tokens, for the documents in ``documents``
        self._index: dict = {}  # key (a tuple of 4 or 2 tokens) -> {slot: (sequence number, newest position)}
        self._size = 0
        self._next = 0

    def __len__(self) -> int:
        return len(self.documents)

    def __contains__(self, document) -> bool:
        try:
            document = check_unbounded_ids("document", document)
        except (TypeError, ValueError):  # not token ids (2.7 used to match token 2): not in the corpus
            return False
        return any(held == document for _, held in self.documents)

    def add(self, output, context=()) -> None:
        """Store one finished output (token ids), preceded by ``context``, the prompt's last tokens before it (at
        most :data:`PROMPT_CONTEXT` are kept). Raises ``TypeError`` or ``ValueError`` naming ``output`` or ``context``
        for anything that is not token ids."""
        output, context = check_unbounded_ids("output", output), check_unbounded_ids("context", context)
        document = context[max(len(context) - PROMPT_CONTEXT, 0):] + output
        document = document[max(len(document) - (self.capacity - 1), 0):]
        if not output or not document:  # nothing to store, or a capacity (0 or 1) that holds no token
            return
        number, slot = self._next, self._next % BUCKET_SLOTS
        self.documents.append((number, document))
        self._held[number] = document
        for key, position in _keyed_positions(document):
            self._index.setdefault(key, {})[slot] = (number, position)  # later positions and outputs overwrite
        self._next += 1
        self._size += len(document) + 1
        while self._size > self.capacity:
            self._forget()

    def _forget(self) -> None:
        """Drop the oldest document and the index entries that point into it. Outputs leave oldest first, so no
        older output of the same slot is left to take an entry's place."""
        number, oldest = self.documents.popleft()
        del self._held[number]
        self._size -= len(oldest) + 1
        for key, _ in _keyed_positions(oldest):
            slots = self._index.get(key)
            if slots is not None and slots.get(number % BUCKET_SLOTS, (None,))[0] == number:
                del slots[number % BUCKET_SLOTS]
                if not slots:
                    del self._index[key]

    def candidates(self, tokens: list, max_depth: int) -> list:
        """``[(match length, (sequence number, position), document), ...]``: for each key length (4, then 2) and
        each of the :data:`BUCKET_SLOTS` slots, the newest position that the last ``key`` tokens of ``tokens``
        precede in the newest document of that slot (number mod 8) holding them, newest document first; each with
        its match length (at most ``max_depth``), a position found by both keys once. One dictionary lookup per key
        length, whatever the corpus holds."""
        found, seen = [], set()
        for key in _KEY_LENGTHS:
            if len(tokens) < key or max_depth < key:
                continue
            for number, position in sorted(self._index.get(tuple(tokens[-key:]), {}).values(), reverse=True):
                if (number, position) not in seen:
                    seen.add((number, position))
                    document = self._held[number]
                    found.append((_match_length(document, position, tokens, max_depth), (number, position),
                                  document))
        return found

    def draft(self, tokens: list, max_depth: int, n_draft: int) -> tuple:
        """``(match length, draft)`` from the corpus for the text ``tokens`` (see the module docstring: candidates
        vote token by token for each match length, the best-scoring chain wins); ``(0, [])`` when nothing matches."""
        candidates = self.candidates(tokens, max_depth)
        best_num, best_den, best = -1, 1, (0, [])
        for length in sorted({c[0] for c in candidates}, reverse=True):
            alive = [c for c in candidates if c[0] >= length]
            start, chain, votes = len(alive), [], 0
            for depth in range(n_draft):
                offered = [(c, c[2][c[1][1] + depth]) for c in alive if c[1][1] + depth < len(c[2])]
                if not offered:
                    break
                counts = {}
                for _, token in offered:
                    counts[token] = counts.get(token, 0) + 1
                most = max(counts.values())
                newest = max(c[1] for c, token in offered if counts[token] == most)
                token = next(t for c, t in offered if c[1] == newest)
                votes += most
                chain.append(token)
                alive = [c for c, t in offered if t == token]
            # fractions compared exactly; the lengths come longest first, so a tie keeps the longer match
            if votes * best_den > best_num * start:
                best_num, best_den, best = votes, start, (length, chain)
        return best


class SuffixMatchDrafter:
    """vLLM 0.34's GPU suffix decoding behind the drafter protocol (see the module docstring): each step drafts up to
    ``n_draft`` tokens (``num_speculative_tokens``; vLLM's default min(8, ``max_depth``)) continuing the longest
    match, at most ``max_depth`` tokens (``suffix_decoding_max_tree_depth``), in the request's own text or in the
    corpus of earlier outputs.

    - ``corpus``: the :class:`SuffixCorpus` to read and add to (None: a private one of vLLM's default capacity). The
      drafter adds its request's output (every new token, the prefill's included), with the :data:`PROMPT_CONTEXT`
      prompt tokens before it, when the next generation starts (:meth:`reset`) or on :meth:`finish`.
    - ``prompt_outputs``: None, or a callable ``prompt_ids -> [token list, ...]`` naming the earlier outputs a
      prompt quotes (:func:`lab.prompts.assistant_turns`): :meth:`reset` stores each once, with the prompt tokens
      that precede its first place in the prompt, as the server that generated them would have stored them.

    Proposals are chains with no draft probabilities (deterministic: verified as one-hot) and no draft forward.
    ``history`` records, per step, the source ("request", "cache" or None), the match length and the draft's
    length. Raises ``ValueError`` naming the argument for an out-of-range setting."""

    def __init__(self, n_draft: int | None = None, max_depth: int = 24, corpus: SuffixCorpus | None = None,
                 prompt_outputs=None):
        self.max_depth = check_int("max_depth", max_depth, 1)
        self.n_draft = min(8, self.max_depth) if n_draft is None else check_int("n_draft", n_draft, 1)
        if corpus is not None and not isinstance(corpus, SuffixCorpus):
            raise ValueError(f"corpus must be a SuffixCorpus or None, got {type(corpus).__name__}")
        if prompt_outputs is not None and not callable(prompt_outputs):
            raise ValueError(f"prompt_outputs must be None or a callable prompt_ids -> token lists, got "
                             f"{type(prompt_outputs).__name__}")
        self.corpus = SuffixCorpus() if corpus is None else corpus
        self.prompt_outputs = prompt_outputs
        self._tokens: list = []
        self._last: list = []
        self._prompt_length = None
        self.history: list = []

    def reset(self, prompt_ids) -> None:
        """Start a generation from ``prompt_ids`` (the prompt and the prefill's first new token): the last
        generation's output goes into the corpus, and so do the outputs the prompt quotes (given
        ``prompt_outputs``). Raises ``TypeError`` / ``ValueError`` naming ``prompt_ids`` when they are not token ids
        (checked first: a bad call leaves the drafter as it was)."""
        prompt_ids = check_unbounded_ids("prompt_ids", prompt_ids)
        self.finish()
        self._tokens = prompt_ids
        for output in quoted_outputs(self.prompt_outputs, self._tokens):
            start = next((p for p in range(len(self._tokens) - len(output) + 1)
                          if self._tokens[p:p + len(output)] == output), 0) if output else 0
            context = self._tokens[max(start - PROMPT_CONTEXT, 0):start]
            if output and context[-PROMPT_CONTEXT:] + output not in self.corpus:
                self.corpus.add(output, context)
        self._prompt_length = max(len(self._tokens) - 1, 0)
        self._last = []
        self.history = []

    def finish(self) -> None:
        """Store the current generation's output (from the prefill's token on, with the prompt tokens before it) in
        the corpus, once; :meth:`reset` calls it for the last generation."""
        if self._prompt_length is not None:
            output = self._tokens[self._prompt_length:]
            if output:
                self.corpus.add(output, self._tokens[:self._prompt_length])
        self._prompt_length = None

    def propose(self, request: DraftRequest) -> Draft:
        """Up to ``min(n_draft, request.max_tokens)`` tokens continuing the longer of the request's and the
        corpus's matches (a tie: the request's). As in vLLM, both are scored over ``n_draft`` tokens and the draft is
        cut to ``max_tokens`` afterwards. Raises ``TypeError`` / ``ValueError`` naming ``request.tokens`` when they
        are not token ids."""
        check_request(request)
        self._sync(request.tokens)
        n = min(self.n_draft, request.max_tokens)
        self._last = []
        if n <= 0:
            return Draft()
        length, position = _longest_match(self._tokens, self.max_depth)
        source, tokens = ("request", self._tokens[position:position + self.n_draft]) if length else (None, [])
        corpus_length, corpus_tokens = self.corpus.draft(self._tokens, self.max_depth, self.n_draft)
        if corpus_length > length and corpus_tokens:
            source, length, tokens = "cache", corpus_length, corpus_tokens
        self._last = tokens[:n]
        self.history.append({"source": source, "pattern": length, "nodes": len(self._last)})
        return Draft(tokens=list(self._last), calls=0)

    def update(self, num_accepted: int, next_token: int) -> None:
        """Append the accepted drafts and the target's token to the request's text (the output the corpus will
        store, its last step included). Raises ``ValueError`` for ``num_accepted`` outside ``[0, drafted tokens]``
        or a ``next_token`` that is not an integer >= 0 (a negative count sliced from the end; 3.7 became 3)."""
        num_accepted = check_int(f"num_accepted (the last draft holds {len(self._last)} tokens)", num_accepted, 0,
                                 len(self._last))
        next_token = check_int("next_token", next_token, 0)
        self._tokens.extend(self._last[:num_accepted] + [next_token])
        self._last = []

    def _sync(self, tokens) -> None:
        """Follow the loop's committed tokens; a text that does not extend this generation's starts a new one."""
        tokens = check_unbounded_ids("request.tokens", tokens)
        if len(tokens) >= len(self._tokens) and tokens[:len(self._tokens)] == self._tokens:
            self._tokens = tokens
        else:
            self._prompt_length = None  # not this generation's text: start over without storing it
            self.reset(tokens)

    def __repr__(self) -> str:
        return f"SuffixMatchDrafter(n_draft={self.n_draft}, max_depth={self.max_depth})"
