"""``python -m lab pick``: recommend a speculative-decoding method and its settings for vLLM, SGLang, TensorRT-LLM,
llama.cpp and transformers (:mod:`lab.picker`)."""
from __future__ import annotations

import argparse

from lab.cli.options import gigabytes, model_name, positive_int, temperature

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``pick`` command and its options to ``sub`` (the subparsers of :func:`lab.cli.build_parser`)."""
    from lab.picker import METHODS, TASKS  # stdlib only: cheap to import

    k = sub.add_parser("pick", help="recommend a speculative-decoding method and its engine settings",
                       description="Recommend a speculative-decoding method, draft length N and draft temperature "
                                   "for a workload (lesson 14), with the reasons, the expected speedup and its "
                                   "source, and the settings for vLLM, SGLang, TensorRT-LLM, llama.cpp and "
                                   "transformers.")
    k.add_argument("--task", required=True, choices=TASKS, help="the workload: " + ", ".join(TASKS))
    k.add_argument("--temperature", type=temperature, default=0.0,
                   help="target sampling temperature, 0 to 2 (the OpenAI API's range); 0 = greedy, and so is anything "
                        "below 1e-5, as in vLLM (default: %(default)s)")
    k.add_argument("--small-model", action=argparse.BooleanOptionalAction, default=False,
                   help="a small model of the target's family exists (vanilla draft) (default: no)")
    k.add_argument("--can-finetune", action="store_true", help="you may train EAGLE / Medusa heads for the target")
    k.add_argument("--target-has-mtp", action="store_true",
                   help="the target's checkpoint ships multi-token-prediction (MTP) modules (DeepSeek-V3/R1, "
                        "Qwen3-Next, GLM-4.5, MiMo, ...), which draft with nothing to train or download")
    k.add_argument("--parallel-draft", dest="has_parallel_draft", action="store_true",
                   help="a parallel (PARD) draft of the target's family exists, published (amd/PARD-*) or adapted "
                        "from a small same-family model; it drafts N tokens in one forward")
    k.add_argument("--throughput", action="store_true", help="throughput-bound, high-batch serving")
    k.add_argument("--memory-gb", type=gigabytes, default=None,
                   help="free accelerator memory beyond the target and its KV cache, GB >= 0 (default: not known, "
                        "assumed to fit)")
    k.add_argument("--exclude", action="append", choices=[m for m in METHODS if m != "none"], metavar="METHOD",
                   help="a method you cannot use, one of " + ", ".join(m for m in METHODS if m != "none")
                        + " (repeatable)")
    k.add_argument("--target", type=model_name, default="<target-model>",
                   help="target model name for the vllm and SGLang command lines (default: %(default)s)")
    k.add_argument("--tensor-parallel-size", type=positive_int, default=1,
                   help="GPUs the target is sharded over, 1 to 1024 (default: %(default)s)")
    k.add_argument("--max-running-requests", type=positive_int, default=None,
                   help="SGLang's cap on concurrent requests, written into its command line when SGLang "
                        "speculates (it caps a speculating server at 48 unless told; a server without speculation "
                        "keeps its own default, so the value is then checked but not written). Default: under "
                        "--throughput, the last batch size the schedule drafts at")
    k.add_argument("--markdown", metavar="FILE", default=None, help="also write a one-page decision guide to FILE")
    k.add_argument("--json", action="store_true", help="print the recommendation as JSON")


def run(args) -> int:
    """``python -m lab pick``: print the recommendation for ``args`` (from :func:`lab.cli.build_parser`), as text or
    JSON, and write the decision guide when ``--markdown`` names a file. Returns the exit status: 0, 2 for a bad
    option (one line naming the flag on stderr), 1 when the guide cannot be written."""
    from lab.picker import report

    return report(args)
