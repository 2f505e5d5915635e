"""What selecting a generated token in ``TokenStream`` shows: the distributions at its position and a sentence.

For each emitted position of a step, :func:`step_details` keeps what the chart and the detail line need, the top
tokens of the target, draft and residual distributions (:func:`top_tokens`) rather than full-vocabulary tensors, so
a long run does not hold them; :func:`describe` turns one such dict into the plain-text explanation (accepted,
rejected and resampled from the residual, or a bonus token). Step records are read, never changed.
"""
from __future__ import annotations

import torch

from lab.sampling import residual_distribution
from lab.trace import own_token_kind
from widgets.token_text import PARTIAL_LABEL, has_special_token, special_token_text

__all__ = ["step_details", "step_distributions", "top_tokens", "quoted", "describe"]


def step_details(record, step, start, drafted, emitted, num_accepted, texts, top_k, tree=None,
                 tree_nodes=None) -> list:
    """One detail dict per emitted position of this step, with the top ``top_k`` tokens of each distribution
    (:func:`top_tokens`) or a note. ``record`` is the step as drawn, a chain (:func:`widgets.tree_steps.chain_view`);
    ``step`` its number in the stream; ``start`` the generated position of its first emitted token; ``drafted``,
    ``emitted``, ``num_accepted`` the record's, as ints; ``texts`` the emitted tokens' texts (None: part of a
    character); ``tree`` is :func:`widgets.tree_steps.tree_residual` of the original record (None for a chain),
    whose residual replaces the chain's at the resampled position, and ``tree_nodes`` the tree's node count.

    Keys: ``position``, ``step``, ``kind``, ``token_id``, ``text``, ``drafted_id``, ``num_drafted``,
    ``rejected_here``, ``truncated``, ``probs``, ``note``, and for :func:`describe` ``_text`` (the text, None for part
    of a character), ``_tree_nodes``, ``_acceptance`` and ``_prefill`` (the record is the prefill; keys starting
    with ``_`` stay out of ``TokenStream.selection``)."""
    details = []
    target_rows, draft_rows, residual_rows, note = step_distributions(record, drafted, len(emitted))
    for offset, token in enumerate(emitted):
        kind = "accepted" if offset < num_accepted else own_token_kind(record)
        # How many drafts the target rejected at this position before choosing its own token: a chain's one,
        # or every child of a tree path's end.
        rejected_here = 0
        if kind == "resampled":
            rejected_here = 1 if tree is None else tree[1]
        detail = {"position": start + offset, "step": step, "kind": kind, "token_id": token,
                  "text": texts[offset] or "",
                  "drafted_id": drafted[offset] if offset < len(drafted) else None,
                  "num_drafted": len(drafted), "rejected_here": rejected_here, "_tree_nodes": tree_nodes,
                  "truncated": bool(record.truncated), "probs": None, "note": note, "_text": texts[offset],
                  "_acceptance": record.acceptance, "_prefill": bool(record.prefill)}
        if target_rows is not None:
            has_draft = offset < len(drafted)
            residual = residual_rows[offset] if has_draft and residual_rows is not None else None
            if kind == "resampled" and tree is not None and residual is not None:
                residual = tree[0]
            detail["probs"] = top_tokens(
                target_rows[offset],
                draft_rows[offset] if has_draft and draft_rows is not None else None,
                residual, [token] + ([drafted[offset]] if has_draft else []), top_k)
        details.append(detail)
    return details


def step_distributions(record, drafted, num_emitted):
    """(target rows, draft rows, residual rows, note) of a chain step: float32 ``[rows, V]`` tensors or Nones, and
    why something is missing ("" when nothing is). A deterministic drafter's rows are one-hot on its drafts; the
    residual is :func:`lab.sampling.residual_distribution` of the positions that were emitted, None under typical
    acceptance (which draws a replacement from the target's row) or when the rows do not fit."""
    if record.target_probs is None:
        return None, None, None, "probabilities were not recorded: call generate(..., record_probs=True)"
    target_rows = torch.as_tensor(record.target_probs).detach().float().cpu()
    if target_rows.dim() != 2 or target_rows.size(0) < num_emitted:
        return None, None, None, (f"target_probs has shape {tuple(target_rows.shape)}; expected "
                                  f"[{len(drafted) + 1}, V]")
    if not drafted:
        return target_rows, None, None, ""
    vocab = target_rows.size(-1)
    if record.draft_probs is None:
        # A deterministic drafter is verified as if its distribution were one-hot on the drafted token.
        draft_rows = torch.nn.functional.one_hot(torch.tensor(drafted), vocab).float()
        note = "deterministic drafter: its distribution is one-hot on the drafted token"
    else:
        draft_rows = torch.as_tensor(record.draft_probs).detach().float().cpu()
        note = ""
    if record.acceptance == "typical":  # the replacement comes from the target's row: no residual to show
        return target_rows, draft_rows, None, note
    rows = min(len(drafted), num_emitted)  # only positions that made it into the output get shown
    if draft_rows.dim() != 2 or draft_rows.size(0) < rows or draft_rows.size(1) != vocab:
        return target_rows, None, None, (f"draft_probs has shape {tuple(draft_rows.shape)}; expected "
                                         f"[{len(drafted)}, {vocab}], so only the target is shown")
    try:
        residual_rows = residual_distribution(target_rows[:rows], draft_rows[:rows])
    except ValueError as error:
        return target_rows, draft_rows, None, f"residual not shown: {error}"
    return target_rows, draft_rows, residual_rows, note


def top_tokens(target, draft, residual, always, top_k: int) -> dict:
    """Union of the ``top_k`` most likely tokens (with non-zero probability) of each distribution (float tensors
    ``[V]``; ``draft`` and ``residual`` may be None), plus the ids in ``always``, ordered by target probability,
    then draft probability, then id: ``{"token_ids", "target", "draft", "residual"}``, lists aligned with
    ``token_ids`` (None for a missing distribution)."""
    chosen = set(always)
    for dist in (target, draft, residual):
        if dist is None:
            continue
        values, ids = torch.topk(dist, min(top_k, dist.numel()))
        chosen.update(int(token) for value, token in zip(values.tolist(), ids.tolist()) if value > 0)
    order = sorted(chosen, key=lambda token: (-float(target[token]),
                                              -float(draft[token]) if draft is not None else 0.0, token))
    return {"token_ids": order,
            "target": [float(target[token]) for token in order],
            "draft": None if draft is None else [float(draft[token]) for token in order],
            "residual": None if residual is None else [float(residual[token]) for token in order]}


def quoted(text) -> str:
    """A token's text quoted for a sentence (``repr``), or a note for a token holding only part of a character; a
    special token shows as the stream shows it, naming the token: ``"'⟨end⟩' (special token '<|im_end|>')"``."""
    if text is None:
        return f"{PARTIAL_LABEL} (part of a character)"
    if has_special_token(text):
        return f"{special_token_text(text)!r} (special token {text!r})"
    return repr(text)


def describe(detail: dict, candidate_text) -> str:
    """One or two plain-text sentences on what happened at ``detail``'s position (a dict of
    :func:`step_details`), with its probabilities. ``candidate_text(token_id, position)`` gives the text a token
    would add at that generated position (None: part of a character), for naming the rejected draft."""
    token = quoted(detail["_text"])
    probs = detail["probs"]

    def prob_of(name, token_id):
        if probs is None or probs[name] is None or token_id not in probs["token_ids"]:
            return None
        return probs[name][probs["token_ids"].index(token_id)]

    def numbers(*names):
        shown = [f"{name} {prob_of(name, detail['token_id']):.3f}" for name in names
                 if prob_of(name, detail["token_id"]) is not None]
        return f" ({', '.join(shown)})" if shown else ""

    head = f"Position {detail['position']} (step {detail['step']}): "
    if detail["kind"] == "accepted":
        text = head + f"the draft proposed {token}{numbers('target', 'draft')} and the target accepted it."
    elif detail["kind"] == "resampled":
        drafted_id = detail["drafted_id"]
        drafted = [f"{name} {prob_of(name, drafted_id):.3f}" for name in ("target", "draft")
                   if prob_of(name, drafted_id) is not None]
        drafted_numbers = f" ({', '.join(drafted)})" if drafted else ""
        proposed = quoted(candidate_text(drafted_id, detail["position"]))
        text = head + f"the draft proposed {proposed}{drafted_numbers}; the target rejected it "
        if detail["_acceptance"] == "typical":
            text += (f"and put {token}{numbers('target')} in its place, drawn from the target's own distribution "
                     "(typical acceptance, Medusa's rule: not exact, so there is no residual).")
        else:
            text += (f"and put {token}{numbers('target', 'residual')} in its place. Sampling draws that token "
                     "from the residual distribution, max(0, target \u2212 draft) rescaled to sum to 1; greedy "
                     "decoding takes the target's argmax.")
        siblings = detail["rejected_here"]
        if siblings > 1:
            text += (f" The tree offered {siblings} drafts here and the target rejected all {siblings} in turn "
                     "(only the first is drawn struck through); the residual shown removes each of them in order.")
    elif detail.get("_prefill"):
        text = (head + f"the first new token {token}{numbers('target')}, the target's own: the prefill, its forward "
                "over the whole prompt, gives it from the prompt's last position, before anything is drafted.")
    elif detail["_tree_nodes"] is not None:
        text = (head + f"bonus token {token}{numbers('target')}: the accepted path ({detail['num_drafted']} of "
                f"the tree's {detail['_tree_nodes']} drafts) reached a node with no children, so the target's "
                "distribution after it, computed in the same call, gives one more token.")
    elif detail["num_drafted"]:
        text = (head + f"bonus token {token}{numbers('target')}: every draft of this step "
                f"({detail['num_drafted']}) was accepted, so the target's distribution after them, computed in "
                "the same call, gives one more token.")
    else:
        text = (head + f"the target's own token {token}{numbers('target')}: the drafter proposed nothing this "
                "step, so the target call gave just its own token, as in ordinary decoding (not a bonus: no draft "
                "was accepted before it).")
    if detail["truncated"]:
        text += " This step was cut short by EOS or max_new_tokens."
    if detail["note"]:
        text += f" Note: {detail['note']}."
    return text
