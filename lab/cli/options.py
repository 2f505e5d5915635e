"""What the commands of ``python -m lab`` share: the ``--pair`` choices, the argparse types of their options (each
names the allowed range in its message; argparse prefixes the flag) and :class:`OptionError`, for the bad options
argparse cannot see.

Imports nothing from ``lab`` and nothing heavy: a bad option must stop before torch is imported.
"""
from __future__ import annotations

import argparse
from pathlib import Path
import sys

__all__ = ["PAIRS", "DEFAULT_PAIR", "CHAT_PAIRS", "CHAT_TEMPERATURE", "demo_temperature", "pair_help", "OptionError",
           "add_run_options", "positive_int", "model_name", "finite_nonnegative", "seed", "temperature", "gigabytes",
           "int_list", "probability", "fit_threads_noting_changes", "WARM_UP_TOKENS", "warm_up_ids", "MAX_DRAFT_LENGTH",
           "draft_length", "folder"]

PAIRS = ("shakespeare", "smollm2-135m", "gpt2", "smollm2", "qwen2.5")
"""The --pair choices: the names of :data:`lab.models.PRESETS`, repeated here so that the command line can check
--pair without importing torch (tests/lab/cli/test_options.py keeps the two equal)."""

DEFAULT_PAIR = "smollm2-135m"
"""The --pair of every command when none is given: the real pair, as ``lab.models.load_pair()``'s default."""

CHAT_PAIRS = ("smollm2-135m",)
"""The offline --pair choices whose target is instruction-tuned: ``bench`` and ``arena`` send them chat requests
(:func:`lab.prompts.chat_prompts`) in the fast dtype."""

CHAT_TEMPERATURE = 0.8
"""The sampling temperature of a demo on a chat pair when none is given (``python -m lab demo``,
``widgets.race.RaceDashboard``): greedy decoding of the real pair loops on open requests, repeating a sentence,
while T ≈ 0.7–0.8 reads naturally. A plain-text pair (shakespeare) stays greedy (0) by default."""


def fit_threads_noting_changes() -> None:
    """Fit torch's threads to the machine's load (:func:`lab.models.fit_threads`), as the lessons do after a pair
    loads, and print its sentence on stderr only when it changed the count: stdout stays the command's output (tables,
    JSON, the answer). On a busy 2-core machine two threads that wait on each other make timings several times slower
    (the README's "If a lesson runs slowly"). Imports torch: call it once a pair has loaded."""
    import torch

    from lab import models

    threads = torch.get_num_threads()
    fitted = models.fit_threads()
    if torch.get_num_threads() != threads:
        print(fitted, file=sys.stderr)


WARM_UP_TOKENS = 64
"""How many of a prompt's last tokens a demo's warm-up prefills (:func:`warm_up_ids`)."""


def warm_up_ids(prompt_ids) -> list:
    """The prompt a demo's untimed warm-up generates from (``python -m lab demo``, ``widgets.race.RaceDashboard``):
    the last :data:`WARM_UP_TOKENS` ids of ``prompt_ids`` (a list of ints, or anything sliceable into one), as a new
    list. The warm-up pays the first forwards' one-off costs (allocations, kernel choice); a short tail does that as
    well as the whole prompt, and a long prompt is not prefilled once more (a 3,000-token prompt took half a race's
    time to warm up)."""
    return list(prompt_ids[-WARM_UP_TOKENS:])


def demo_temperature(given, chat: bool) -> float:
    """The temperature a demo samples at (``python -m lab demo``, ``widgets.race.RaceDashboard``): ``given`` (a
    number, already checked) when not None, else :data:`CHAT_TEMPERATURE` for a chat pair (``chat`` True: one with a
    chat template) and 0.0 (greedy) for a plain-text pair."""
    if given is not None:
        return float(given)
    return CHAT_TEMPERATURE if chat else 0.0


pair_help = (f"model pair preset, one of {', '.join(PAIRS)} (default: %(default)s; shakespeare and smollm2-135m "
             "work offline)")
"""The help text of every command's --pair."""


class OptionError(Exception):
    """A bad option argparse cannot check: a prompt with no tokens or a prompt plus ``--max-new-tokens`` longer
    than the target's context (found once the pair is loaded), or a ``bench`` / ``arena`` ``--prompts`` above the
    prompts bundled (found before it loads). :func:`lab.cli.main` prints ``python -m lab COMMAND: error: FLAG:
    MESSAGE`` and returns 2, as argparse does for the options it can check itself."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")
        self.flag = flag


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (argparse prefixes the flag to the message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


MAX_DRAFT_LENGTH = 64
"""The most draft tokens per step the commands take (``--n-draft``, ``--lookup-n-draft``): far past any useful draft
(engines default to 3-10), and 10**30 failed deep inside transformers after the pair had loaded."""


def draft_length(text: str) -> int:
    """argparse type: draft tokens per step, a whole number in [1, :data:`MAX_DRAFT_LENGTH`]."""
    value = positive_int(text)
    if value > MAX_DRAFT_LENGTH:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_DRAFT_LENGTH}, got {text!r}")
    return value


def folder(text: str) -> Path:
    """argparse type: a folder's path, not empty (an empty path would mean the current folder, the repository's
    root when run from there)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, got an empty path (it would mean the current folder)")
    return Path(text)


def int_list(low: int):
    """An argparse type for a comma-separated list of whole numbers >= ``low`` (``"1,2,4"``; spaces allowed),
    returned as a sorted list without repeats; used by ``bench --batch`` for its batch sizes and N."""
    def parse(text: str) -> list:
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            values = []
        if not values or min(values) < low:
            raise argparse.ArgumentTypeError(f"must be comma-separated whole numbers >= {low}, e.g. "
                                             f"{','.join(str(low + i) for i in range(3))}, got {text!r}")
        return sorted(set(values))

    return parse


def probability(text: str) -> float:
    """argparse type: a probability strictly between 0 and 1 (``demo --confidence``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), e.g. 0.4, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), e.g. 0.4, got {text!r}")
    return value


def model_name(text: str) -> str:
    """argparse type: a model name or path for the rendered command lines (not empty, no surrounding spaces, on one
    line, not starting with ``-``: :func:`lab.picker.substitutes.check_model_name`)."""
    from lab.picker.substitutes import check_model_name

    try:
        return check_model_name("it", text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a model name or path on one line, not starting with '-', such as "
                                         f"meta-llama/Llama-3.1-70B-Instruct, got {text!r}") from None


def finite_nonnegative(what: str, example: str):
    """An argparse type for a finite number >= 0, described in its messages as ``what`` (e.g. "number of GB")."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a {what} >= 0{example}, got {text!r}") from None
        if not (value >= 0 and value != float("inf")):
            raise argparse.ArgumentTypeError(f"must be a finite {what} >= 0{example}, got {text!r}")
        return value

    return parse


def seed(text: str) -> int:
    """argparse type: a whole number that ``torch.Generator.manual_seed`` accepts, negative ones included: the rule
    of :func:`lab.validation.check_seed`, which ``generate`` and ``RaceDashboard`` apply (written out here, as
    ``--help`` and parsing import no torch; a test holds the two to one range)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not -2 ** 63 <= value < 2 ** 64:
        raise argparse.ArgumentTypeError(f"must be a whole number from -2**63 to 2**64 - 1, got {text!r}")
    return value


def temperature(text: str) -> float:
    """argparse type: a sampling temperature in the OpenAI API's range, 0 (greedy) to
    :data:`lab.picker.tables.MAX_API_TEMPERATURE` (2), for ``demo`` and ``pick`` (the range
    :func:`lab.picker.recommend` takes); one message for every bad value (a word, a negative number, one above 2,
    NaN), naming the range and what was typed."""
    from lab.picker.tables import MAX_API_TEMPERATURE  # stdlib only, read when a temperature is given

    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= MAX_API_TEMPERATURE:  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"must be a number from 0 (greedy) to {MAX_API_TEMPERATURE:g} (the OpenAI "
                                         f"API's range), got {text!r}")
    return value


gigabytes = finite_nonnegative("number of GB", "")
"""argparse type: an amount of memory in GB, a finite number >= 0."""


def add_run_options(parser, *, json_help: str, max_new_tokens: int, prompts: int, prompts_help: str,
                    n_draft_help: str) -> None:
    """Add the options ``bench`` and ``arena`` share to ``parser``: ``--json``, ``--max-new-tokens`` (default
    ``max_new_tokens``), ``--prompts`` (default ``prompts``), ``--n-draft`` (default 4) and ``--pair``."""
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument("--max-new-tokens", type=positive_int, default=max_new_tokens,
                        help="tokens to generate per prompt, >= 1 (default: %(default)s)")
    parser.add_argument("--prompts", type=positive_int, default=prompts, help=prompts_help)
    parser.add_argument("--n-draft", type=draft_length, default=4, help=n_draft_help)
    parser.add_argument("--pair", choices=PAIRS, default=DEFAULT_PAIR, metavar="PAIR", help=pair_help)
