"""Parsers for the engines' own code, pinned in tests/data/engines/ (see its README): the real sets of keys, flags
and method names each engine accepts, read from the source rather than copied into a list.

- vLLM: the fields of ``SpeculativeConfig`` and the ``SpeculativeMethod`` literal (``ast``).
- SGLang: the ``Spec`` fields that become ``--speculative-*`` flags, and ``SpeculativeAlgorithm``'s members
  (``ast``).
- TensorRT-LLM: the fields of each config class in the ``SpeculativeConfig`` union and its ``decoding_type``
  literal (``ast``, on the course's skeleton of ``llm_args.py``).
- vLLM and SGLang: module constants of their ``sampling_params.py`` (``_SAMPLING_EPS``), and the temperature
  bound vLLM's ``SamplingParams._verify_args`` enforces.
- vLLM's GPU suffix speculator: the ``num_speculative_tokens`` default its config sets, the settings it reads, its
  module constants and the lengths of the keys its corpus index uses (``ast``).
- llama.cpp: every flag string of the ``add_opt(common_arg({...}))`` table, minus the removed ones, and the
  ``--spec-type`` names (regular expressions on the C++ text); the member defaults of a ``common.h`` struct.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from types import SimpleNamespace
from pathlib import Path

ENGINES = Path(__file__).resolve().parents[2] / "data" / "engines"
VLLM_FILE = ENGINES / "vllm-0.34.0" / "vllm" / "config" / "speculative.py"
SGLANG_ROOT = ENGINES / "sglang-0.5.23" / "sglang" / "srt"
TRTLLM_FILE = ENGINES / "tensorrt-llm-0004396" / "tensorrt_llm" / "llmapi" / "llm_args_speculative.py"
LLAMACPP_ROOT = ENGINES / "llama.cpp-from-llama-cpp-python-0.3.36" / "common"
VLLM_SAMPLING_FILE = ENGINES / "vllm-0.34.0" / "vllm" / "sampling_params.py"
SGLANG_SAMPLING_FILE = SGLANG_ROOT / "sampling" / "sampling_params.py"
VLLM_SUFFIX_ROOT = ENGINES / "vllm-0.34.0" / "vllm" / "v1" / "worker" / "gpu" / "spec_decode" / "suffix"


# --- Python helpers ---------------------------------------------------------------------------------------------------
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def module_constant(path: Path, name: str):
    """The literal value of the module-level assignment ``name = <literal>`` in ``path``."""
    for node in _tree(path).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(f"{name} not assigned at module level in {path.name}")


def vllm_max_temperature() -> float:
    """The upper bound ``SamplingParams._verify_args`` puts on ``temperature`` in vLLM (``if self.temperature >
    X: raise ...("temperature must be in [0, X]")``)."""
    text = VLLM_SAMPLING_FILE.read_text(encoding="utf-8")
    (bound,) = set(re.findall(r"if self\.temperature > ([0-9.]+):\s*raise \w+\(\s*f\"temperature must be in \[0, "
                              r"([0-9.]+)\]", text))
    assert float(bound[0]) == float(bound[1]), bound
    return float(bound[0])


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"class {name} not found")


def _literal_aliases(tree: ast.Module) -> dict:
    """Module-level ``Name = Literal[...]`` assignments -> their members (str values or names of other aliases)."""
    aliases = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == "Literal":
                items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
                aliases[node.targets[0].id] = items
    return aliases


def _resolve_literal(aliases: dict, name: str) -> frozenset:
    out = set()
    for item in aliases[name]:
        if isinstance(item, ast.Constant):
            out.add(item.value)
        elif isinstance(item, ast.Name):
            out |= _resolve_literal(aliases, item.id)
    return frozenset(out)


def _literal_values(annotation: ast.expr) -> frozenset:
    """Every string inside ``Literal[...]`` anywhere in ``annotation``."""
    out = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            out |= {i.value for i in items if isinstance(i, ast.Constant)}
    return frozenset(out)


def _init_false(value) -> bool:
    """True for ``field(..., init=False)`` / ``Field(..., init=False)``: not settable by the user."""
    return isinstance(value, ast.Call) and any(k.arg == "init" and isinstance(k.value, ast.Constant)
                                               and k.value.value is False for k in value.keywords)


def _constant(value):
    """A default given as a constant expression (``24``, ``1 << 20``), else None."""
    if value is None:
        return None
    try:
        return ast.literal_eval(value)
    except ValueError:
        pass
    if all(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)) for n in ast.walk(value)):
        return eval(compile(ast.Expression(value), "<default>", "eval"), {"__builtins__": {}})
    return None


# --- vLLM -------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VllmSource:
    keys: frozenset          # SpeculativeConfig fields a user can set (init fields, not SkipValidation internals)
    methods: frozenset       # SpeculativeMethod's values
    draft_sample_methods: frozenset
    rejection_sample_methods: frozenset
    defaults: dict           # field -> default, where it is a constant


@functools.lru_cache(maxsize=None)
def vllm_source(path: Path = VLLM_FILE) -> VllmSource:
    tree = _tree(path)
    aliases = _literal_aliases(tree)
    keys, defaults = set(), {}
    for node in _class(tree, "SpeculativeConfig").body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        if _init_false(node.value) or "SkipValidation" in ast.unparse(node.annotation):
            continue
        keys.add(node.target.id)
        default = _constant(node.value)
        if default is not None:
            defaults[node.target.id] = default
    return VllmSource(frozenset(keys), _resolve_literal(aliases, "SpeculativeMethod"),
                      _resolve_literal(aliases, "DraftSampleMethod"),
                      _resolve_literal(aliases, "RejectionSampleMethod"), defaults)


# --- vLLM's GPU suffix speculator ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VllmSuffixSource:
    default_n_draft_rule: str  # what SuffixSpeculatorConfig.configure sets num_speculative_tokens to when it is unset
    min_depth: int           # the smallest suffix_decoding_max_tree_depth configure accepts
    reads: dict              # SuffixSpeculator attribute -> the expression __init__ sets it from (``spec.<field>``)
    launches: dict           # kernel keyword (MAX_DEPTH, K) -> the set of expressions propose passes as it
    constants: dict          # module-level int constants of speculator.py (_BUCKET_SLOTS, _PROMPT_CONTEXT, ...)
    key_lengths: tuple       # the lengths of the keys the ingest kernel indexes each position under, longest first

    def default_n_draft(self, max_tree_depth: int) -> int:
        """``num_speculative_tokens`` as vLLM sets it when the user leaves it unset, for this tree depth (the rule
        evaluated with ``min``/``max`` only)."""
        spec = SimpleNamespace(suffix_decoding_max_tree_depth=max_tree_depth)
        code = compile(self.default_n_draft_rule, "<configure>", "eval")
        return eval(code, {"__builtins__": {"min": min, "max": max}}, {"spec": spec})


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


@functools.lru_cache(maxsize=None)
def vllm_suffix_source(root: Path = VLLM_SUFFIX_ROOT) -> VllmSuffixSource:
    configure = _method(_class(_tree(root / "config.py"), "SuffixSpeculatorConfig"), "configure")
    (unset,) = [n for n in ast.walk(configure) if isinstance(n, ast.If)
                and ast.unparse(n.test) == "spec.num_speculative_tokens is None"]
    (rule,) = [ast.unparse(n.value) for n in ast.walk(unset) if isinstance(n, ast.Assign)
               and [ast.unparse(t) for t in n.targets] == ["spec.num_speculative_tokens"]]
    (min_depth,) = [n.comparators[0].value for n in ast.walk(configure) if isinstance(n, ast.Compare)
                    and ast.unparse(n.left) == "spec.suffix_decoding_max_tree_depth" and isinstance(n.ops[0], ast.Lt)]
    tree = _tree(root / "speculator.py")
    speculator = _class(tree, "SuffixSpeculator")
    reads = {}
    for node in ast.walk(_method(speculator, "__init__")):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self" and node.value is not None \
                and "spec." in ast.unparse(node.value):
            reads[target.attr] = ast.unparse(node.value)
    launches = {}
    for node in ast.walk(_method(speculator, "propose")):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in ("MAX_DEPTH", "K"):
                    launches.setdefault(keyword.arg, set()).add(ast.unparse(keyword.value))
    constants = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)
                 and type(node.value.value) is int}
    ingest = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_suffix_ingest_kernel")
    lengths = []  # atomic_max(..., mask=m & (j >= KEY)): a position is indexed once KEY tokens precede it
    for node in ast.walk(ingest):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "atomic_max":
            mask = next(k.value for k in node.keywords if k.arg == "mask")
            (bound,) = [c.comparators[0].value for c in ast.walk(mask) if isinstance(c, ast.Compare)
                        and ast.unparse(c.left) == "j" and isinstance(c.ops[0], ast.GtE)]
            lengths.append(bound)
    return VllmSuffixSource(rule, min_depth, reads, {k: frozenset(v) for k, v in launches.items()}, constants,
                            tuple(sorted(lengths, reverse=True)))


# --- SGLang -----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SglangSource:
    flags: frozenset         # every CLI flag the Spec, Model and Parallel fields define (aliases and --no-X included)
    algorithms: frozenset    # --speculative-algorithm values (upper case; SGLang upper-cases what it is given)
    cli_name_rule: str       # the body of _field_to_cli_name, to check the rule this parser applies


def _sglang_flags(path: Path) -> set:
    """The flags ``add_cli_args_from_dataclass`` makes from the ``A[type, help-or-Arg]`` fields of ``path``."""
    flags = set()
    for cls in (n for n in _tree(path).body if isinstance(n, ast.ClassDef)):
        for node in cls.body:
            if not isinstance(node, ast.AnnAssign) or not isinstance(node.annotation, ast.Subscript):
                continue
            meta = node.annotation.slice.elts[1] if isinstance(node.annotation.slice, ast.Tuple) else None
            if meta is None:
                continue  # no help and no Arg: not a CLI argument
            kw = {k.arg: k.value for k in meta.keywords} if isinstance(meta, ast.Call) else {}
            if "no_cli" in kw and ast.literal_eval(kw["no_cli"]) is True:
                continue
            name = ast.literal_eval(kw["cli_name"]) if "cli_name" in kw else "--" + node.target.id.replace("_", "-")
            flags.add(name)
            if "aliases" in kw:
                flags |= set(ast.literal_eval(kw["aliases"]))
            if "action" in kw and ast.unparse(kw["action"]).endswith("BooleanOptionalAction"):
                flags.add("--no-" + name[2:])
    return flags


@functools.lru_cache(maxsize=None)
def sglang_source(root: Path = SGLANG_ROOT) -> SglangSource:
    flags = set()
    for name in ("spec.py", "model.py", "parallel.py", "schedule.py"):
        flags |= _sglang_flags(root / "arg_groups" / "fields" / name)
    members = {t.id for node in _class(_tree(root / "speculative" / "spec_info.py"), "SpeculativeAlgorithm").body
               if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    reserved = set()
    for node in _tree(root / "speculative" / "spec_registry.py").body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_RESERVED_ALIASES" for t in node.targets):
            reserved = {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    rule = next(node for node in _tree(root / "arg_groups" / "arg_utils.py").body
                if isinstance(node, ast.FunctionDef) and node.name == "_field_to_cli_name")
    returned = next(n for n in ast.walk(rule) if isinstance(n, ast.Return))
    return SglangSource(frozenset(flags), frozenset((members - {"NONE"}) | reserved), ast.unparse(returned.value))


# --- TensorRT-LLM -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrtllmSource:
    fields: dict             # decoding_type value -> frozenset of the settable fields of its class (inherited too)
    union: tuple             # the class names in the SpeculativeConfig union


@functools.lru_cache(maxsize=None)
def trtllm_source(path: Path = TRTLLM_FILE) -> TrtllmSource:
    tree = _tree(path)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def settable(name: str) -> dict:
        """field -> annotation for class ``name`` and its bases in the file (a subclass's declaration wins)."""
        cls = classes[name]
        out = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                out.update(settable(base.id))
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if _init_false(node.value):
                    out.pop(node.target.id, None)
                else:
                    out[node.target.id] = node.annotation
        return out

    alias = next(node for node in tree.body if isinstance(node, ast.AnnAssign)
                 and getattr(node.target, "id", "") == "SpeculativeConfig")
    union_node = next(n for n in ast.walk(alias.value) if isinstance(n, ast.Subscript)
                      and getattr(n.value, "id", "") == "Union")
    union = tuple(e.id for e in union_node.slice.elts)
    fields = {}
    for name in union:
        annotations = settable(name)
        (decoding_type,) = _literal_values(annotations["decoding_type"])
        fields[decoding_type] = frozenset(annotations)
    return TrtllmSource(fields, union)


# --- llama.cpp --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LlamacppSource:
    flags: frozenset         # flags llama-server accepts (its examples include SERVER or COMMON; removed ones left out)
    removed: frozenset       # flags still in the table only to stop with "the argument has been removed"
    spec_types: frozenset    # --spec-type names


_OPT = re.compile(r"add_opt\(\s*common_arg\(\s*((?:\{[^{}]*\}\s*,\s*)+)")
_STRING = re.compile(r'"(-[^"]+)"')


@functools.lru_cache(maxsize=None)
def llamacpp_source(root: Path = LLAMACPP_ROOT) -> LlamacppSource:
    text = (root / "arg.cpp").read_text(encoding="utf-8")
    starts = [m.start() for m in _OPT.finditer(text)]
    flags, removed = set(), set()
    for i, match in enumerate(_OPT.finditer(text)):
        body = text[match.start(): starts[i + 1] if i + 1 < len(starts) else len(text)]
        names = set(_STRING.findall(match.group(1)))
        examples = re.search(r"\.set_examples\(\{([^}]*)\}", body)
        for_server = examples is None or re.search(r"LLAMA_EXAMPLE_(SERVER|COMMON)\b", examples.group(1))
        if "arg_removed(" in body:
            removed |= names
        elif for_server:
            flags |= names
    table = (root / "speculative.cpp").read_text(encoding="utf-8")
    types = set(re.findall(r'\{\s*"([a-z0-9-]+)"\s*,\s*COMMON_SPECULATIVE_TYPE_[A-Z0-9_]+\s*\}', table))
    return LlamacppSource(frozenset(flags), frozenset(removed), frozenset(types))


_STRUCT_MEMBER = re.compile(r"^\s*[\w:]+\s+(\w+)\s*=\s*(-?[0-9.]+f?)\s*;", re.M)


def llamacpp_struct_defaults(name: str, root: Path = LLAMACPP_ROOT) -> dict:
    """The numeric member defaults (``int32_t n_match = 24;``) of ``struct name { ... };`` in ``common/common.h``:
    member -> int or float."""
    text = (root / "common.h").read_text(encoding="utf-8")
    (body,) = re.findall(r"^struct " + re.escape(name) + r" \{(.*?)^\};", text, re.M | re.S)
    return {member: float(value.rstrip("f")) if "." in value else int(value)
            for member, value in _STRUCT_MEMBER.findall(body)}


# --- transformers -----------------------------------------------------------------------------------------------------
def transformers_generate_keys() -> frozenset:
    """What the installed transformers' ``generate`` accepts as keyword arguments: ``GenerationConfig``'s attributes
    (``generate`` passes unknown keywords to it) and ``generate``'s own named parameters."""
    import inspect

    from transformers import GenerationConfig, GenerationMixin

    params = set(inspect.signature(GenerationMixin.generate).parameters) - {"self", "kwargs"}
    return frozenset(set(GenerationConfig().to_dict()) | params)
