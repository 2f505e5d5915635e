"""Token-tree geometry: from a parents array to depths, position ids, the tree attention mask and the paths.

A token tree packs several candidate continuations into one target forward (SpecInfer, Miao et al. 2024; Medusa,
Cai et al. 2024, §2.1.2 "tree attention"; EAGLE, Li et al. 2024). Node ``i`` holds one draft token; ``parents[i]``
is the index of its parent node (always ``< i``, so the nodes are in topological order) or -1 when its parent is
the last committed token. Two rules make one forward equal to many separate ones:

- a node's position is the position its token would have in a plain sequence, so siblings share a position;
- a node attends to the committed prefix, its ancestors and itself, never to siblings or cousins.

**Depth, one convention for the whole course.** A node's *depth* is the number of draft tokens on its path from
the last committed token, itself included: the first level (``parents[i] == -1``) has depth 1, its children depth
2, and a tree's depth is its number of levels (``MedusaDrafter.depth``, ``StepRecord.depth``, ``TreeViewer`` and
lessons 10–11 all count this way). With ``prefix_len`` committed tokens the last one sits at ``prefix_len - 1``,
so a node of depth d sits at ``prefix_len - 1 + d``. :func:`depths` returns the 0-based *level* ``d - 1`` (0 for
the first level), the offset that positions and cache slots are indexed by: ``position_ids = prefix_len +
depths(parents)``.

A chain ``[-1, 0, 1, ...]`` is the degenerate tree: its mask is the ordinary causal mask. Lesson 10.

Integer arguments (``prefix_len``, ``node``, ``n``, the entries of ``parents``) may be Python or NumPy integers or
integer 0-d tensors; bools are rejected.
"""
from __future__ import annotations

import torch

from lab.validation import MAX_LENGTH, check_int, is_integer  # is_integer: the one integer test of lab

__all__ = ["check_parents", "depths", "position_ids", "tree_attention_mask", "paths", "children", "ancestors",
           "chain_parents", "check_choices", "choices_parents", "MAX_PREFIX"]


def check_parents(parents) -> list[int]:
    """Validate a parents array and return it as a list of ints.

    ``parents``: a list, tuple or 1-D tensor of integers. Raises ``ValueError`` unless every ``parents[i]`` is -1 or
    an earlier node index (``-1 <= parents[i] < i``), ``TypeError`` when ``parents`` is not iterable or is text, a
    dict or a set (no node order).
    """
    if isinstance(parents, torch.Tensor):
        parents = parents.tolist()
    if isinstance(parents, (str, bytes, dict, set, frozenset)) or not hasattr(parents, "__iter__"):
        raise TypeError(f"parents must be a list, tuple or 1-D tensor of ints (-1 or an earlier node index), got "
                        f"{type(parents).__name__}")
    parents = list(parents)
    if not all(is_integer(p) for p in parents):
        raise ValueError(f"parents must hold integers (-1 or an earlier node index), got {parents!r}")
    out = [int(p) for p in parents]
    bad = [(i, p) for i, p in enumerate(out) if not -1 <= p < i]
    if bad:
        i, p = bad[0]
        raise ValueError(f"parents[{i}] must be -1 (the last committed token) or an earlier node in [0, {i}), "
                         f"got {p}: nodes must be listed parents first")
    return out


def _int_at_least(name: str, value, low: int, what: str = "") -> int:
    """``int(value)`` if ``value`` is an integer (:func:`lab.validation.is_integer`: 0-d integer tensors too)
    ``>= low``; else ``ValueError`` naming ``name``."""
    if type(value) is not int:  # fast path for plain ints
        if not is_integer(value):
            raise ValueError(f"{name} must be an integer >= {low}{what}, got {value!r}")
        value = int(value)
    if value < low:
        raise ValueError(f"{name} must be an integer >= {low}{what}, got {value!r}")
    return value


def check_choices(choices, max_depth: int | None = None, max_rank: int | None = None,
                  name: str = "choices") -> list[tuple[int, ...]]:
    """Validate a tree given as paths of ranks (Medusa's "choices", EAGLE's static trees): path ``(i, j)`` is the
    j-th best token after the i-th best one. Returns the paths as tuples sorted parents first (by depth, then
    ranks), the node order of :func:`choices_parents`.

    Raises ``ValueError`` (naming ``name``, the caller's argument) for an empty set, an empty path or a rank that
    is not an integer in ``[0, max_rank)``, a duplicate, a path deeper than ``max_depth``, or a path whose prefix
    is missing, and for a ``max_depth`` or ``max_rank`` that is not an integer >= 1; a flat list of integers (a
    parents array, the verifiers' format) is named as such. Raises
    ``TypeError`` naming ``name`` when ``choices`` is not a list, tuple or other sequence of paths (a string, a dict,
    an object such as an EAGLE-2 ``DynamicTree``, which only the EAGLE drafters take, or a class).
    """
    if choices is not None and (isinstance(choices, (str, bytes, dict, type)) or not hasattr(choices, "__len__")
                                or not hasattr(choices, "__iter__")):
        what = f"the class {choices.__name__}" if isinstance(choices, type) else type(choices).__name__
        raise TypeError(f"{name} must be a list of rank paths, e.g. [(0,), (1,), (0, 0)], got {what}; a dynamic tree "
                        "(lab.drafters.DynamicTree(...), an instance) is taken only by the EAGLE and EAGLE-3 drafters")
    if choices is None or len(choices) == 0:
        raise ValueError(f"{name}{'' if name == 'tree' else ' (the tree)'} must hold at least one path, e.g. [(0,)]")
    if all(is_integer(entry) for entry in choices):
        raise ValueError(f"{name} must be paths of ranks, e.g. [(0,), (0, 0), (1,)] (the best token, the best after "
                         f"it, the second best), got the flat list {list(choices)!r}; a parents array is the "
                         "verifiers' format (lab.trees.choices_parents turns paths into one)")
    for limit_name, limit in (("max_depth", max_depth), ("max_rank", max_rank)):
        if limit is not None:
            _int_at_least(limit_name, limit, 1)
    paths = []
    for path in choices:
        try:
            path = tuple(path)
        except TypeError:
            raise ValueError(f"{name}: every path must be a tuple of ranks, e.g. (0, 1), got {path!r}") from None
        if not path or not all(is_integer(r) and r >= 0 for r in path):
            raise ValueError(f"{name}: every path must be a non-empty tuple of integer ranks >= 0, got {path!r}")
        if max_rank is not None and max(path) >= max_rank:
            raise ValueError(f"{name}: path {path} uses rank {max(path)}, but ranks must be < {max_rank} "
                             "(the vocabulary size)")
        if max_depth is not None and len(path) > max_depth:
            raise ValueError(f"{name}: path {path} is {len(path)} deep; at most {max_depth} allowed")
        paths.append(tuple(int(r) for r in path))
    if len(set(paths)) != len(paths):
        raise ValueError(f"{name}: the same path appears twice")
    known = set(paths)
    for path in paths:
        if len(path) > 1 and path[:-1] not in known:
            raise ValueError(f"{name}: path {path} needs its parent {path[:-1]} in the tree too")
    return sorted(paths, key=lambda p: (len(p), p))


def choices_parents(paths) -> list[int]:
    """The parents array of rank paths in node order, each after its parent (the output of :func:`check_choices`
    is; lists count as tuples). Node i of the tree is ``paths[i]``.

    Raises what :func:`check_choices` raises for ``paths`` (naming ``paths``: a duplicate, a missing parent, a rank
    that is not an integer >= 0), and ``ValueError`` for a path listed before its parent."""
    check_choices(paths, name="paths")
    paths = [tuple(int(r) for r in p) for p in paths]
    index = {p: i for i, p in enumerate(paths)}
    parents = [index[p[:-1]] if len(p) > 1 else -1 for p in paths]
    late = next((i for i, parent in enumerate(parents) if parent > i), None)
    if late is not None:
        raise ValueError(f"paths: {paths[late]} (node {late}) comes before its parent {paths[late][:-1]} (node "
                         f"{parents[late]}); list every path after its parent, as check_choices' order does")
    return parents


def chain_parents(n: int) -> list[int]:
    """The parents array of a chain of ``n`` drafts: ``[-1, 0, 1, ..., n - 2]`` (``[]`` for ``n = 0``).

    Raises ``ValueError`` unless ``n`` is an integer in [0, :data:`lab.validation.MAX_LENGTH`]."""
    n = check_int("n (the number of drafts in the chain)", n, 0, MAX_LENGTH)
    return list(range(-1, n - 1))


def depths(parents) -> torch.Tensor:
    """The 0-based level of every node, LongTensor ``[n]``: 0 for children of the last committed token, the
    parent's + 1 below. In the course's depth convention (module docstring) that is depth − 1: a node of depth d
    (d draft tokens on its path) has level d − 1, and ``depths(parents).max() + 1`` is the tree's depth.

    ``parents``: a list, tuple or 1-D tensor of ints (see :func:`check_parents`). Raises ``ValueError`` for a bad
    parents array (an entry that is not an integer, or not -1 or an earlier node index) and ``TypeError`` when
    ``parents`` is not iterable."""
    parents = check_parents(parents)
    out: list[int] = []
    for p in parents:
        out.append(0 if p < 0 else out[p] + 1)
    return torch.tensor(out, dtype=torch.long)


MAX_PREFIX = 2**62
"""The most committed tokens :func:`position_ids` takes: positions are int64, and far below this a context is
already beyond any model's."""


def position_ids(parents, prefix_len: int) -> torch.Tensor:
    """Absolute position of every node, LongTensor ``[n]``: ``prefix_len + depths(parents)``, i.e.
    ``prefix_len - 1 + d`` for a node of depth d, where ``prefix_len`` counts the committed tokens (the last
    committed token sits at ``prefix_len - 1``, the first level right after it). Siblings share a position.

    Raises ``ValueError`` for a bad parents array or ``prefix_len`` outside [1, :data:`MAX_PREFIX`]."""
    prefix_len = _int_at_least("prefix_len", prefix_len, 1, " (the committed tokens)")
    if prefix_len > MAX_PREFIX:  # torch's int64 would wrap 2**63 to a negative position
        raise ValueError(f"prefix_len (the committed tokens) must be at most {MAX_PREFIX}, got {prefix_len}")
    return depths(parents) + prefix_len


def ancestors(parents, node: int) -> list[int]:
    """The nodes from the top of the tree down to ``node``'s parent (excluding ``node``), as a list of node
    indices (``[]`` for a node on the first level).

    Raises ``ValueError`` for a bad parents array (see :func:`check_parents`) or a ``node`` that is not an integer
    node index in ``[0, len(parents))`` (-1, the last committed token, has no ancestors among the nodes);
    ``TypeError`` when ``parents`` is not iterable."""
    parents = check_parents(parents)
    if not is_integer(node) or not 0 <= int(node) < len(parents):
        raise ValueError(f"node must be an integer node index in [0, {len(parents)}), got {node!r}")
    node = int(node)
    chain = []
    p = parents[node]
    while p >= 0:
        chain.append(p)
        p = parents[p]
    return chain[::-1]


_MASK_LIMIT = 2 ** 31  # entries of a tree attention mask (bool, 1 byte each)


def tree_attention_mask(parents, prefix_len: int) -> torch.Tensor:
    """Which keys each node may attend to, BoolTensor ``[n, prefix_len + n]`` (True = may attend): all
    ``prefix_len`` committed tokens, then over the nodes its ancestors and itself.

    Raises ``ValueError`` for a bad parents array, ``prefix_len < 0``, or a mask of more than 2**31 entries (2 GiB;
    a context far beyond any model's, refused before memory is asked for)."""
    parents = check_parents(parents)
    prefix_len = _int_at_least("prefix_len", prefix_len, 0, " (the committed tokens)")
    n = len(parents)
    if n and n * (prefix_len + n) > _MASK_LIMIT:
        raise ValueError(f"prefix_len must be at most {_MASK_LIMIT // n - n} for a tree of {n} nodes (the mask is kept "
                         f"under {_MASK_LIMIT} entries), got {prefix_len}")
    mask = torch.zeros(n, prefix_len + n, dtype=torch.bool)
    mask[:, :prefix_len] = True
    for i, p in enumerate(parents):
        mask[i, prefix_len + i] = True
        if p >= 0:  # a node sees everything its parent sees
            mask[i, prefix_len:prefix_len + i] = mask[p, prefix_len:prefix_len + i]
    return mask


def children(parents, node: int = -1) -> list[int]:
    """The nodes whose parent is ``node`` (-1: the top level), in the order they are listed.

    Raises ``ValueError`` for a bad parents array or a ``node`` that is not -1 or a node index."""
    parents = check_parents(parents)
    if not is_integer(node) or not -1 <= int(node) < len(parents):
        raise ValueError(f"node must be -1 (the top level) or an integer node index in [0, {len(parents)}), "
                         f"got {node!r}")
    node = int(node)
    return [i for i, p in enumerate(parents) if p == node]


def paths(parents) -> list[list[int]]:
    """Every root-to-leaf path as a list of node indices, leaves in listed order. A chain has one path; an empty
    tree has none (``[]``).

    Raises ``ValueError`` for a bad parents array (see :func:`check_parents`), ``TypeError`` when ``parents`` is
    not iterable."""
    parents = check_parents(parents)
    has_child = set(p for p in parents if p >= 0)
    return [ancestors(parents, leaf) + [leaf] for leaf in range(len(parents)) if leaf not in has_child]
