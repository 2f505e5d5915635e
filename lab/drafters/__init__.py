"""Drafting methods, all behind one protocol (:class:`lab.drafters.base.Drafter`)."""
from lab.drafters.base import Draft, DraftRequest, Drafter
from lab.drafters.draft_model import DraftModelDrafter
from lab.drafters.lookahead import LookaheadDrafter
from lab.drafters.prompt_lookup import PromptLookupDrafter

__all__ = ["Draft", "DraftRequest", "Drafter", "DraftModelDrafter", "PromptLookupDrafter", "LookaheadDrafter"]
