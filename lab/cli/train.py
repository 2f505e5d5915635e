"""``python -m lab train``: train a drafter for the real pair or the Shakespeare pair (or the Shakespeare pair
itself), measure it and write its model card, or fine-tune a copy-capable target; for the real pair, build its chat
data and train its draft
model, EAGLE draft, Medusa heads, MTP heads, EAGLE-3 draft and parallel draft (:mod:`lab.training`)."""
from __future__ import annotations

import json
from pathlib import Path

from lab.cli.options import folder, positive_int

__all__ = ["add_parser", "run", "OUT_RECIPES", "INIT_RECIPES"]

OUT_RECIPES = ("chat-draft", "chat-eagle", "chat-medusa", "chat-mtp", "chat-eagle3", "chat-parallel")
"""The recipes ``--out`` applies to: the real pair's drafts."""
INIT_RECIPES = ("chat-eagle", "chat-eagle3")
"""The recipes ``--init`` applies to: the real pair's feature drafts, which can continue a saved draft."""


def add_parser(sub) -> None:
    """Add the ``train`` command and its options to ``sub`` (the subparsers of :func:`lab.cli.build_parser`)."""
    t = sub.add_parser("train", help="train a drafter (chat-* for the real pair; draft, medusa, eagle, eagle3, mtp, "
                                     "parallel or the pair itself for Shakespeare) or measure one for its card",
                       description="Train a drafter and measure it for its model card: for the real pair "
                                   "(smollm2-135m) the chat-* targets, on data chat-data builds offline from the "
                                   "target's own answers; for the bundled Shakespeare pair the others (the pair "
                                   "itself, its draft, Medusa heads, EAGLE, EAGLE-3, MTP and parallel drafts), or a "
                                   "copy-capable target beside it.")
    t.add_argument("what", choices=["pair", "draft", "card", "medusa", "eagle", "eagle3", "mtp", "parallel",
                                    "copy-target", "chat-data", "chat-draft", "chat-eagle", "chat-medusa", "chat-mtp",
                                    "chat-eagle3", "chat-parallel"],
                   help="pair: tokenizer, target and draft; draft: re-distil the draft only; card: measure; "
                        "medusa / eagle / mtp: train the Medusa heads / EAGLE draft / multi-token-prediction heads "
                        "on the committed target; eagle3: the EAGLE-3 draft (fused low/middle/high target "
                        "layers, training-time test, reduced draft vocabulary); "
                        "parallel: adapt the committed draft into a parallel (PARD) draft "
                        "that proposes a block of tokens in one forward; "
                        "copy-target: fine-tune the committed target to copy from its context (saved in the "
                        "cache, not over the bundled pair); chat-data: the real pair's target answers the "
                        "training prompts and requests it writes itself (cached, resumable); chat-draft: distil "
                        "the real pair's draft model from that data; chat-eagle / chat-medusa: train the real "
                        "pair's EAGLE draft / Medusa heads on it; chat-mtp: its multi-token-prediction heads "
                        "(DeepSeek-V3's form) on it; chat-eagle3: its EAGLE-3 draft on it (layers 2, 15, 30, "
                        "training-time test, saved in the cache unless --out says where; resumable); "
                        "chat-parallel: adapt the real pair's draft model into a parallel (PARD) draft on it "
                        "(saved in the cache unless --out says where; resumable)")
    t.add_argument("--threads", type=positive_int, default=None,
                   help="torch CPU threads for training and for the card's timings, >= 1 (default: torch's own "
                        "choice)")
    t.add_argument("--out", type=folder, default=None,
                   help="chat-draft, chat-eagle, chat-medusa, chat-mtp, chat-eagle3 and chat-parallel only: the "
                        "folder to write the draft to (default: the committed one in lab/assets/smollm2-135m/, and "
                        "for chat-eagle3 and chat-parallel <cache>/drafts/smollm2-135m-eagle3 / -parallel); a "
                        "retrain that should not replace the committed weights passes one")
    t.add_argument("--init", type=folder, default=None,
                   help="chat-eagle and chat-eagle3 only: continue training the draft saved in this folder (its "
                        "weights and draft vocabulary) for 500 more steps from a peak learning rate of 3e-4 "
                        "(lab.training.chat_eagle.CONTINUATION), e.g. --init lab/assets/smollm2-135m/eagle3")


def run(args) -> int:
    """``python -m lab train WHAT``: run the training or measurement ``args.what`` names (``args`` from
    :func:`lab.cli.build_parser`) with ``args.threads`` torch threads, and print the model card or training record
    it wrote. Returns 0, or 2 after one error line when ``--out`` or ``--init`` cannot be used
    (:func:`_option_problem`)."""
    from lab import training

    if args.threads is not None:  # for `card` too, whose decode timings (cost per token, c) depend on it
        import torch

        torch.set_num_threads(args.threads)
    out, init = getattr(args, "out", None), getattr(args, "init", None)
    problem = _option_problem(args.what, out, init)  # before any model loads: a long job must not fail at its end
    if problem:
        import sys

        print(f"python -m lab train: error: {problem}", file=sys.stderr)
        return 2
    if args.what == "chat-data" or args.what in OUT_RECIPES:
        return _train_chat(args.what, out, init)
    if args.what == "copy-target":
        out = training.train_copy_target(threads=args.threads)
        print((Path(out) / "training.json").read_text())
        return 0
    if args.what == "eagle3":
        from lab.training.eagle3 import train_eagle3, write_eagle3_card

        print(Path(write_eagle3_card(train_eagle3(threads=args.threads))).read_text())
        return 0
    if args.what == "mtp":
        from lab.training.mtp import train_mtp

        out = train_mtp(threads=args.threads)
        print((Path(out) / "training.json").read_text())
        return 0
    if args.what == "parallel":
        from lab.training.parallel import train_parallel

        out = train_parallel(threads=args.threads)
        print((Path(out) / "training.json").read_text())
        return 0
    if args.what in ("medusa", "eagle"):
        card = training.train_medusa(threads=args.threads) if args.what == "medusa" else \
            training.train_eagle(threads=args.threads)
        print(Path(card).read_text())
        return 0
    if args.what != "card":
        training.train_pair(threads=args.threads, draft_only=args.what == "draft")
    training.write_card()
    print((training.PAIR_DIR / "README.md").read_text())
    return 0


def _option_problem(what: str, out: Path | None, init: Path | None) -> str | None:
    """What is wrong with ``--out`` (given for a recipe outside :data:`OUT_RECIPES`, or a file, under a file, or in a
    folder this user cannot write) or ``--init`` (given outside :data:`INIT_RECIPES`, or not a saved draft of the
    kind ``what`` trains: ``config.json`` + ``model.safetensors``, :func:`lab.assets.check_model_type`), as one line;
    None when both are usable or not given."""
    import os

    if out is not None and what not in OUT_RECIPES:
        return f"--out applies to {', '.join(OUT_RECIPES)} only, not to {what}"
    if init is not None and what not in INIT_RECIPES:
        return f"--init applies to {', '.join(INIT_RECIPES)} only, not to {what}"
    if out is not None:
        out = Path(out)
        if out.exists() and not out.is_dir():
            return f"--out {out} is a file, not a folder"
        existing = next(p for p in [out, *out.parents] if p.exists())
        if not existing.is_dir():
            return f"--out {out} lies under {existing}, which is a file, not a folder"
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"--out {out}: this user cannot write in {existing}"
    if init is not None:
        import json

        from lab.assets import check_model_type

        missing = [name for name in ("config.json", "model.safetensors") if not (Path(init) / name).is_file()]
        if missing:
            return (f"--init {init} holds no saved draft ({' and '.join(missing)} missing); give the folder of a "
                    f"{what} draft, e.g. --init lab/assets/smollm2-135m/{what.removeprefix('chat-')}")
        try:
            check_model_type(json.loads((Path(init) / "config.json").read_text()),
                             {"chat-eagle": "lab-eagle", "chat-eagle3": "lab-eagle3"}[what], init)
        except ValueError as error:
            return f"--init: {error}"
    return None


def _train_chat(what: str, out_dir: Path | None = None, init: Path | None = None) -> int:
    """``train chat-data`` (bfloat16 where native: generation), ``train chat-draft`` (float32 target, bf16 autocast
    where native; ``chat-parallel`` too, which adapts that draft) or ``train chat-eagle`` / ``chat-medusa`` /
    ``chat-mtp`` / ``chat-eagle3`` (the target in its fast
    dtype, whose features the drafter reads), all on the CPU, logging to stdout and printing the draft's
    ``training.json``; ``chat-parallel`` then writes its card's measurements, ``chat-eagle3`` and ``chat-mtp`` their
    cards (:func:`lab.training.chat_eagle3.write_chat_eagle3_card`, :func:`lab.training.chat_mtp
    .write_chat_mtp_card`), timed with the real pair in its serving dtype.
    ``out_dir``: the folder to write the draft to, None for the recipe's default; ``init``: a saved draft to continue
    (``chat-eagle`` / ``chat-eagle3``, :data:`lab.training.chat_eagle.CONTINUATION`), None to train a fresh one."""
    import time

    from lab.models import load_target
    from lab.training.chat_data import build_chat_data
    from lab.training.chat_draft import train_chat_draft
    from lab.training.chat_eagle import train_chat_eagle
    from lab.training.chat_eagle3 import train_chat_eagle3
    from lab.training.chat_medusa import train_chat_medusa
    from lab.training.chat_mtp import train_chat_mtp
    from lab.training.chat_parallel import train_chat_parallel

    def log(message):
        print(time.strftime("%H:%M:%S"), message, flush=True)

    if what == "chat-data":
        pair = load_target(device="cpu", dtype="auto")
        for source in ("templates", "self"):
            print(build_chat_data(pair, source=source, log=log))
    else:
        trainer = {"chat-draft": train_chat_draft, "chat-eagle": train_chat_eagle, "chat-medusa": train_chat_medusa,
                   "chat-mtp": train_chat_mtp, "chat-eagle3": train_chat_eagle3,
                   "chat-parallel": train_chat_parallel}[what]
        # the draft model distils from the float32 target; the feature drafts read features in the fast dtype
        distilled = what in ("chat-draft", "chat-parallel")
        pair = load_target(device="cpu") if distilled else load_target(device="cpu", dtype="auto")
        options = {} if out_dir is None else {"out_dir": out_dir}
        if init is not None:
            from dataclasses import replace

            from lab.training.chat_eagle import CONTINUATION, ChatEagleRecipe
            from lab.training.chat_eagle3 import ChatEagle3Recipe

            fresh = ChatEagleRecipe() if what == "chat-eagle" else ChatEagle3Recipe()
            options["recipe"] = replace(fresh, init=str(init), **CONTINUATION)
        out = trainer(pair, log=log, **options)
        print((Path(out) / "training.json").read_text())
        if what == "chat-parallel":  # the card's timings, in the dtype the arena and bench serve the pair in
            from lab.models import load_pair
            from lab.training.parallel import write_parallel_measurements

            log("measuring the parallel draft against the draft model (measurements.json)")
            measured = write_parallel_measurements(load_pair("smollm2-135m", device="cpu", dtype="auto"), out)
            print(json.dumps(measured, indent=1))
        if what == "chat-eagle3":  # the card: decoding against the EAGLE draft, in the serving dtype
            from lab.models import load_pair
            from lab.training.chat_eagle3 import write_chat_eagle3_card

            log("timing the EAGLE-3 draft against the EAGLE draft (measurements.json, README.md)")
            print(Path(write_chat_eagle3_card(load_pair("smollm2-135m", device="cpu", dtype="auto"), out)).read_text())
        if what == "chat-mtp":  # the card: decoding against EAGLE and Medusa at the same depth, in the serving dtype
            from lab.models import load_pair
            from lab.training.chat_mtp import write_chat_mtp_card

            log("timing the MTP heads against the EAGLE draft and the Medusa heads (measurements.json, README.md)")
            print(Path(write_chat_mtp_card(load_pair("smollm2-135m", device="cpu", dtype="auto"), out)).read_text())
    return 0
