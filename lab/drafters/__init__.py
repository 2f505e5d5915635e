"""Drafting methods, all behind one protocol (:class:`lab.drafters.base.Drafter`)."""
from lab.drafters.base import Draft, DraftRequest, Drafter, TargetOutput
from lab.drafters.draft_model import DraftModelDrafter
from lab.drafters.dynamic_tree import DynamicTree
from lab.drafters.eagle import EagleDrafter
from lab.drafters.eagle3 import Eagle3Drafter
from lab.drafters.early_exit import EarlyExitDrafter
from lab.drafters.lookahead import LookaheadDrafter
from lab.drafters.medusa import MedusaDrafter
from lab.drafters.mtp import MTPDrafter
from lab.drafters.parallel import ParallelDrafter
from lab.drafters.prompt_lookup import PromptLookupDrafter
from lab.drafters.suffix import SuffixDecodingDrafter
from lab.drafters.suffix_match import SuffixMatchDrafter

__all__ = ["Draft", "DraftRequest", "Drafter", "TargetOutput", "DraftModelDrafter", "PromptLookupDrafter",
           "LookaheadDrafter", "MedusaDrafter", "EarlyExitDrafter", "EagleDrafter", "SuffixDecodingDrafter",
           "MTPDrafter", "ParallelDrafter", "Eagle3Drafter", "SuffixMatchDrafter", "DynamicTree"]
