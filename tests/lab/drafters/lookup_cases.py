"""Shared data of the lookup drafters' oracle tests (tests/lab/drafters/test_lookup_oracles.py) and their fixtures
(conftest.py): the prompts, the output length and the drafters by kind."""
from lab.drafters import LookaheadDrafter, PromptLookupDrafter

# A passage repeated so that lookups hit from the first step, a short prompt and a plain one.
REPEATED = [5, 9, 13, 2, 7, 11, 5, 9, 13, 2, 7, 11, 5, 9]
PROMPTS = [[3], [1, 2, 3, 4, 5], list(range(10, 40)), REPEATED]
MAX_NEW = 40

DRAFTERS = {
    "ngram": lambda n: PromptLookupDrafter(max_ngram=3, n_draft=n),
    "ngram1": lambda n: PromptLookupDrafter(max_ngram=1, n_draft=n),
    "ngram-earliest": lambda n: PromptLookupDrafter(max_ngram=2, n_draft=n, match="earliest"),  # transformers' rule
    "lookahead": lambda n: LookaheadDrafter(window=n, ngram=3),
    "jacobi": lambda n: LookaheadDrafter(window=n, ngram=2, pool_size=1),
}
