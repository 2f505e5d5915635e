"""Drafting methods, all behind one protocol (:class:`lab.drafters.base.Drafter`)."""
from lab.drafters.base import Draft, DraftRequest, Drafter
from lab.drafters.draft_model import DraftModelDrafter

__all__ = ["Draft", "DraftRequest", "Drafter", "DraftModelDrafter"]
