"""The layers of DESIGN ("Layers"): every import in lab/ and widgets/, those inside functions included, goes down the
layers or stays within one layer without a cycle; no private name is imported from another module."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Module (or package prefix) -> layer. A module that is not listed fails the test: a new module must be placed.
LAYERS = {
    "lab": 0, "lab.validation": 0, "lab.words": 0,
    "lab.sampling": 1, "lab.trees": 1, "lab.trace": 1, "lab.detok": 1, "lab.metrics": 1, "lab.toy": 1,
    "lab.load_meter": 1, "lab.compare": 1, "lab.goals": 1,
    "lab.verify": 2, "lab.assets": 2, "lab.kv": 2, "lab.models": 2,
    "lab.drafters": 3, "lab.decode": 3, "lab.batched": 3,
    "lab.registry": 4, "lab.prompts": 4, "lab.costs": 4,
    "lab.bench": 5, "lab.goodput": 5, "lab.arena": 5, "lab.arena_reading": 5, "lab.picker": 5, "lab.training": 5,
    "lab.cli": 6, "lab.__main__": 6, "lab.exercises": 6, "widgets": 6,
}
# Only these may import the exercise checkers: nothing in lab does (the notebooks and tests do).
EXERCISES = "lab.exercises"


def module_files(root: Path, packages=("lab", "widgets")) -> dict:
    """Dotted module name -> file, for every .py file under the packages (``__init__`` names its package)."""
    mods = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def imports_of(name: str, path: Path, mods: dict) -> list:
    """(imported module, imported names, line) for every import of a project module in ``path``, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: anchor at this module's package
                anchor = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in mods:  # `from lab import sampling` imports the module lab.sampling
                    found.append((sub, [], node.lineno))
                else:
                    found.append((base, [alias.name], node.lineno))
    return [(resolve(target, mods), names, line) for target, names, line in found if resolve(target, mods)]


def resolve(target: str, mods: dict):
    while target and target not in mods:
        target = target.rpartition(".")[0]
    return target or None


def layer_of(module: str):
    """The layer of ``module``: its own entry, or its package's (``lab`` itself places only lab/__init__.py)."""
    if module in LAYERS:
        return LAYERS[module]
    while (module := module.rpartition(".")[0]) and module != "lab":
        if module in LAYERS:
            return LAYERS[module]
    return None


def problems(root: Path) -> list:
    """Every upward import, import of a private name across modules, import of the exercises from lab, unplaced
    module and import cycle under ``root``, as readable lines (empty when the layering holds)."""
    mods = module_files(root)
    found, edges = [], {m: set() for m in mods}
    for module, path in mods.items():
        own = layer_of(module)
        if own is None:
            found.append(f"{module} is in no layer: place it in tests/test_layers.py's LAYERS (and DESIGN)")
            continue
        for target, names, line in imports_of(module, path, mods):
            if target == module or module.startswith(target + "."):  # itself, or its own parent package
                continue
            where = f"{path.relative_to(root)}:{line}"
            edges[module].add(target)
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                found.append(f"{where}: {module} (layer {own}) imports {target} (layer {theirs})")
            if target.startswith(EXERCISES) and not module.startswith(EXERCISES) and module.startswith("lab"):
                found.append(f"{where}: {module} imports the exercises ({target}); nothing in lab may")
            for imported in names:
                if imported.startswith("_") and not imported.startswith("__"):
                    found.append(f"{where}: {module} imports the private name {target}.{imported}")
    found += [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(edges)]
    return found


def cycles(edges: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_lab_and_widgets_follow_the_layers():
    assert problems(ROOT) == []


def long_modules(root: Path, limit: int = 800) -> dict:
    """Every module under ``root`` longer than ``limit`` lines: path -> line count."""
    return {str(p.relative_to(root)): n for p in module_files(root).values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit}


def test_every_module_is_at_most_800_lines(tmp_path):
    assert long_modules(ROOT) == {}
    planted = _plant(tmp_path, {"lab/__init__.py": "", "lab/kv.py": "x = 1\n" * 801, "lab/trees.py": "x = 1\n" * 800})
    assert long_modules(planted) == {"lab/kv.py": 801}


def _plant(tmp_path, files: dict) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "widgets").mkdir(exist_ok=True)
    return tmp_path


@pytest.mark.parametrize("files, expected", [
    # an upward import hidden inside a function
    ({"lab/__init__.py": "", "lab/models.py": "def f():\n    from lab.decode import generate\n",
      "lab/decode.py": ""}, "lab.models (layer 2) imports lab.decode (layer 3)"),
    # `from lab import bench` is an import of the module lab.bench
    ({"lab/__init__.py": "", "lab/kv.py": "from lab import bench\n", "lab/bench.py": ""},
     "lab.kv (layer 2) imports lab.bench (layer 5)"),
    # a relative import inside a package
    ({"lab/__init__.py": "", "lab/drafters/__init__.py": "", "lab/drafters/eagle.py": "from ..training import x\n",
      "lab/training/__init__.py": ""}, "lab.drafters.eagle (layer 3) imports lab.training (layer 5)"),
    # a cycle within one layer
    ({"lab/__init__.py": "", "lab/kv.py": "import lab.models\n", "lab/models.py": "def f():\n    import lab.kv\n"},
     "import cycle: lab.kv -> lab.models"),
    ({"lab/__init__.py": "", "lab/decode.py": "from lab.verify import _tree_sampled\n", "lab/verify.py": ""},
     "imports the private name lab.verify._tree_sampled"),
    ({"lab/__init__.py": "", "lab/bench.py": "from lab.exercises import lesson01\n",
      "lab/exercises/__init__.py": "", "lab/exercises/lesson01.py": ""}, "imports the exercises"),
    ({"lab/__init__.py": "", "lab/newthing.py": ""}, "lab.newthing is in no layer"),
])
def test_a_planted_violation_is_reported(tmp_path, files, expected):
    found = problems(_plant(tmp_path, files))
    assert any(expected in line for line in found), found


def test_imports_that_go_down_are_clean(tmp_path):
    files = {"lab/__init__.py": "", "lab/validation.py": "",
             "lab/sampling.py": "from lab.validation import check_int\n",
             "lab/decode.py": "from lab import sampling\nfrom lab.sampling import probs_from_logits\n",
             "widgets/__init__.py": "from lab.decode import generate\n"}
    assert problems(_plant(tmp_path, files)) == []
