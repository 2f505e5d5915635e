"""The training prompts of the real pair's drafts: balanced kinds, reproducible, and never a held-out request."""
import ast

from lab.prompts import CHAT_TASKS, chat_prompts
from lab.training.chat_prompts import TASK_KINDS, stdlib_functions, training_prompts


def test_training_prompts_are_balanced_reproducible_and_differ_by_seed(monkeypatch):
    import lab.training.chat_prompts as module

    monkeypatch.setattr(module, "_passages", lambda count, rng: [f"line {i}\nline {i + 1}" for i in range(count)])
    prompts = training_prompts(80, seed=3)
    assert TASK_KINDS == CHAT_TASKS
    assert [sum(kind == k for kind, _ in prompts) for k in TASK_KINDS] == [20, 20, 20, 20]
    assert prompts == training_prompts(80, seed=3)
    assert prompts != training_prompts(80, seed=4)
    assert all(isinstance(text, str) and text.strip() for _, text in prompts)


def test_training_prompts_drop_the_held_out_requests(monkeypatch):
    import lab.training.chat_prompts as module

    monkeypatch.setattr(module, "_passages", lambda count, rng: ["a\nb"] * count)
    prompts = training_prompts(400, seed=0)
    dropped = {prompts[0][1], prompts[5][1]}
    kept = training_prompts(400, seed=0, exclude=dropped)
    assert not dropped & {text for _, text in kept}
    assert len(kept) == len(prompts) - sum(text in dropped for _, text in prompts)
    held_out = {text for kind in CHAT_TASKS for text in chat_prompts(kind)}
    assert not held_out & {text for _, text in prompts}  # written apart: no exclusion needed


def test_stdlib_functions_are_whole_top_level_functions():
    functions = stdlib_functions(limit=50, seed=1)
    assert len(functions) == 50 and functions == stdlib_functions(limit=50, seed=1)
    for source in functions:
        tree = ast.parse(source)
        assert isinstance(tree.body[0], ast.FunctionDef) and len(tree.body) == 1
        assert 4 <= len(source.splitlines()) <= 18
