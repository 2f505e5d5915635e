"""What ``python -m lab pick`` does once its arguments are parsed: recommend, print the summary or the JSON, and
write the Markdown decision guide (:func:`report`). The command line (``lab.cli``) parses the flags and calls it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from lab.picker.rules import recommend

__all__ = ["report", "FLAGS", "flag_message"]

FLAGS = {"memory_headroom_gb": "--memory-gb", "tensor_parallel_size": "--tensor-parallel-size",
         "temperature": "--temperature", "task": "--task", "exclude": "--exclude", "target_has_mtp": "--target-has-mtp",
         "has_parallel_draft": "--parallel-draft", "max_running_requests": "--max-running-requests"}
""":func:`lab.picker.recommend`'s, :meth:`lab.picker.Recommendation.vllm_command`'s and
:meth:`lab.picker.Recommendation.sglang_command`'s argument names -> the ``python -m lab pick`` flags that set
them."""


def flag_message(message: str) -> str:
    """A ``ValueError`` message from :func:`recommend` with its leading argument name replaced by the CLI flag."""
    for name, flag in FLAGS.items():
        if message.startswith(name + " "):
            return flag + message[len(name):]
    return message


def report(args) -> int:
    """``python -m lab pick`` after argument parsing: print the recommendation to stdout (its summary, or with
    ``args.json`` its JSON with the ``vllm serve``, SGLang and ``llama-server`` commands and the TensorRT-LLM YAML
    added); with ``args.markdown`` also write the decision
    guide there. Returns the exit status.

    ``args`` (an ``argparse.Namespace`` or any object with these attributes) carries task, temperature,
    small_model, can_finetune, throughput, memory_gb, markdown, target, tensor_parallel_size, json, exclude and
    target_has_mtp, has_parallel_draft and max_running_requests (the flags of ``python -m lab pick``, as ``lab.cli``
    names them; a missing target_has_mtp or has_parallel_draft counts as False, a missing max_running_requests as
    None). A bad value prints one line naming the flag to
    stderr and returns 2 (before anything is printed to stdout; a ``--markdown`` path whose folder does not exist
    counts as a bad value); a guide that cannot be written for another reason (permissions, a full disk) prints one
    line to stderr and returns 1, also before anything is printed to stdout. Raises ``TypeError`` when ``args``
    lacks one of the attributes that have no default (a caller's mistake, not a learner's flag).
    """
    def fail(message: str, status: int) -> int:
        print(f"python -m lab pick: {message}", file=sys.stderr)
        return status

    missing = [name for name in ("task", "temperature", "small_model", "can_finetune", "throughput", "memory_gb",
                                 "markdown", "target", "tensor_parallel_size", "json", "exclude")
               if not hasattr(args, name)]
    if missing:  # report(None) raised an AttributeError naming no argument
        raise TypeError(f"args must carry the flags of python -m lab pick (an argparse.Namespace); "
                        f"{type(args).__name__} lacks {', '.join(missing)}")

    try:
        rec = recommend(args.task, args.temperature, bool(args.small_model), bool(args.can_finetune),
                        latency_bound=not args.throughput, memory_headroom_gb=args.memory_gb,
                        exclude=tuple(args.exclude or ()),
                        target_has_mtp=bool(getattr(args, "target_has_mtp", False)),
                        has_parallel_draft=bool(getattr(args, "has_parallel_draft", False)))
        tp, running = args.tensor_parallel_size, getattr(args, "max_running_requests", None)
        command = rec.vllm_command(args.target, tp)
        sglang = rec.sglang_command(args.target, tp, max_running_requests=running)
    except ValueError as error:
        return fail(flag_message(str(error)), 2)
    path = None
    if args.markdown is not None:
        if not str(args.markdown).strip():
            return fail("--markdown: give a file name, e.g. guide.md (got an empty one)", 2)
        path = Path(args.markdown)
        if path.is_dir():
            return fail(f"--markdown: {path} is a folder; give a file name, e.g. {path / 'guide.md'}", 2)
        if not path.parent.is_dir():
            return fail(f"--markdown: cannot write {path}: the folder {path.parent} does not exist", 2)
    if path is not None:  # written before anything is printed, so a failed write leaves stdout empty
        try:
            path.write_text(rec.to_markdown(args.target, tp, max_running_requests=running), encoding="utf-8")
        except OSError as error:
            return fail(f"--markdown: cannot write {path}: {error.strerror or error}", 1)
    if args.json:
        data = rec.to_dict()
        data["vllm_command"] = command
        data["sglang_args"] = rec.sglang_args(max_running_requests=running)
        data["sglang_command"] = sglang
        data["trtllm_yaml"] = rec.trtllm_yaml()
        data["llamacpp_command"] = rec.llamacpp_command()
        print(json.dumps(data, indent=1))
    else:
        print(rec.summary(args.target, tp, max_running_requests=running))
    if path is not None and not args.json:
        print(f"\nDecision guide written to {path}")
    return 0
