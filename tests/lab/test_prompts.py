"""lab.prompts: the prompt sets per task kind on the bundled pair."""

from __future__ import annotations

import numpy as np
import pytest

from lab.prompts import copy_heavy_prompts, edit_prompts, record_prompts


def test_workload_prompts_fit_the_context(pair):
    limit = pair.target.config.max_position_embeddings
    for prompts in (copy_heavy_prompts(pair), edit_prompts(pair), record_prompts(pair)):
        assert prompts and all(len(pair.encode(p)) + 128 <= limit for p in prompts)
    assert record_prompts(pair)[0].startswith('{"speaker": ')


def test_arena_prompts_per_task(pair):
    from lab.prompts import ARENA_TASKS, arena_prompts, held_out_prompts

    assert arena_prompts(pair, "prose") == held_out_prompts()
    assert len(arena_prompts(pair, "copy_edit")) == len(arena_prompts(pair, "copy")) == 8
    assert len(arena_prompts(pair, "structured")) >= 4
    assert set(ARENA_TASKS) == {"prose", "copy_edit", "structured", "copy"}
    with pytest.raises(ValueError, match="task must be one of"):
        arena_prompts(pair, "poetry")


def test_prompt_lists_are_checked():
    from lab.prompts import check_prompts

    with pytest.raises(TypeError, match="wrap it in a list"):
        check_prompts("ROMEO.")
    with pytest.raises(ValueError, match="non-empty"):
        check_prompts([])
    with pytest.raises(TypeError, match="texts must be a list of strings"):
        check_prompts([1], "texts")
    assert check_prompts(("a", "b")) == ["a", "b"]


def test_prompt_builders_check_their_counts(pair):
    from lab.prompts import copy_heavy_prompts, record_prompts

    for repeats in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
            copy_heavy_prompts(pair, repeats=repeats)
    for records in (0, 1):  # one record and the next one's opening is not a prompt: it used to return []
        with pytest.raises(ValueError, match="records must be an integer >= 2"):
            record_prompts(pair, records=records)
    with pytest.raises(TypeError, match="texts must be a list of strings, got one str"):
        copy_heavy_prompts(pair, "ROMEO.\nBut soft")
    two = copy_heavy_prompts(pair, ["ROMEO.\nBut soft, what light\n"], repeats=np.int64(2))
    assert len(two) == 1 and two[0].count("ROMEO.\nBut soft, what light\n\n\n") == 2
    assert len(record_prompts(pair, records=np.int64(2))) > len(record_prompts(pair, records=4)) > 0
