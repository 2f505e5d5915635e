"""lab.goals: benchmark goals judged on unrounded values and printed with the digits their verdict needs."""


def test_goal_lines_say_met_missed_or_not_measured():
    from lab.goals import goal_lines

    text = goal_lines([("prompt lookup on copy/edit", 2.71, 2.5), ("draft efficiency", 0.85, 0.9),
                       ("EAGLE", None, 2.0), ("cost ratio c", 0.08, 0.1, "<="), ("EAGLE c", 0.12, 0.1, "<=")])
    assert text.splitlines() == ["- [x] prompt lookup on copy/edit: 2.71 (goal >= 2.5): met on this machine",
                                 "- [ ] draft efficiency: 0.85 (goal >= 0.9): NOT met on this machine",
                                 "- [ ] EAGLE: not measured in this run",
                                 "- [x] cost ratio c: 0.08 (goal <= 0.1): met on this machine",
                                 "- [ ] EAGLE c: 0.12 (goal <= 0.1): NOT met on this machine"]


def test_goals_are_judged_and_printed_on_unrounded_values():
    """A value that rounds onto the goal is judged as measured, and printed with the digits that show why: 1.995
    misses 2.0 (not a met "2.00"), 0.1004 misses an upper bound of 0.1 (not "0.10 ... NOT met"); exactly on the line
    prints as it is."""
    from lab.goals import goal_lines, goal_record

    goals = [goal_record("speedup", 1.995, 2.0), goal_record("c", 0.1004, 0.1, at_most=True),
             goal_record("just met", 2.0004, 2.0), goal_record("c met", 0.0996, 0.1, at_most=True),
             goal_record("a hair short", 1.9999999, 2.0), goal_record("on the line", 2.0, 2.0)]
    assert [goal["met"] for goal in goals] == [False, False, True, True, False, True]
    assert [goal["status"] for goal in goals] == ["not met", "not met", "met", "met", "not met", "met"]
    assert goals[0]["measured"] == 1.995   # kept unrounded for the JSON
    assert goal_lines(goals).splitlines() == [
        "- [ ] speedup: 1.995 (goal >= 2.0): NOT met on this machine",
        "- [ ] c: 0.1004 (goal <= 0.1): NOT met on this machine",
        "- [x] just met: 2.0004 (goal >= 2.0): met on this machine",
        "- [x] c met: 0.0996 (goal <= 0.1): met on this machine",
        "- [ ] a hair short: 1.9999999 (goal >= 2.0): NOT met on this machine",
        "- [x] on the line: 2.00 (goal >= 2.0): met on this machine"]


def test_a_goal_not_measured_is_neither_met_nor_missed_and_says_why():
    from lab.goals import NOT_MEASURED, goal_lines, goal_record

    not_run = goal_record("EAGLE c", None, 0.1, at_most=True)
    no_drafts = goal_record("EAGLE alpha gain", None, 0.1, missing="n/a: ran, but no draft was examined")
    assert (not_run["met"], not_run["status"]) == (None, NOT_MEASURED)
    assert (no_drafts["met"], no_drafts["status"]) == (None, "n/a: ran, but no draft was examined")
    assert goal_lines([not_run, no_drafts]).splitlines() == [
        "- [ ] EAGLE c: not measured in this run", "- [ ] EAGLE alpha gain: n/a: ran, but no draft was examined"]


def test_goals_not_judged_keep_their_numbers_and_say_why():
    import pytest

    from lab.goals import goal_lines, goal_record, not_judged

    goals = [goal_record("speedup", 2.31, 2.0), goal_record("c", 0.08, 0.1, at_most=True),
             goal_record("EAGLE c", None, 0.1, at_most=True)]
    unjudged = not_judged(goals, "a smaller run")
    assert [goal["met"] for goal in unjudged] == [None] * 3 and goals[0]["met"] is True  # copies
    assert [goal["measured"] for goal in unjudged] == [2.31, 0.08, None]
    assert goal_lines(unjudged).splitlines() == ["- [ ] speedup: 2.31 (goal >= 2.0): not judged: a smaller run",
                                                 "- [ ] c: 0.08 (goal <= 0.1): not judged: a smaller run",
                                                 "- [ ] EAGLE c: not measured in this run"]
    with pytest.raises(ValueError, match="reason must be a non-empty str"):
        not_judged(goals, "")


def test_goal_met_takes_lower_and_upper_bounds():
    from lab.goals import goal_met

    assert goal_met(2.5, 2.5) is True and goal_met(2.49, 2.5) is False and goal_met(None, 2.5) is None
    assert goal_met(0.1, 0.1, at_most=True) is True and goal_met(0.11, 0.1, at_most=True) is False
    assert goal_met(float("nan"), 2.0) is False  # a NaN measurement meets no goal


def test_goal_met_names_a_value_that_is_not_a_number():
    import pytest

    from lab.goals import goal_met

    for measured, threshold, name in (("a", 1.0, "measured"), (True, 1.0, "measured"), (1.0, "2", "threshold"),
                                      (1.0, None, "threshold"), (None, None, "threshold")):
        with pytest.raises(TypeError, match=f"{name} must be a real number"):
            goal_met(measured, threshold)


def test_goal_lines_and_not_judged_name_goals_they_cannot_read():
    """None, or a tuple too short to unpack, raised errors that named nothing."""
    import pytest

    from lab.goals import goal_lines, goal_record, not_judged

    for bad, words in ((None, "got NoneType"), ([("a",)], r"got \('a',\)")):
        with pytest.raises(TypeError, match=f"goals must be a list of goal_record.* or .*tuples, {words}"):
            goal_lines(bad)
    with pytest.raises(TypeError, match=r"goals must be a list of goal_record\(...\) dicts, got None"):
        not_judged([None], "a small run")
    with pytest.raises(TypeError, match=r"goals must be a list of goal_record\(...\) dicts, got \('a', 1.0, 2.0\)"):
        not_judged([("a", 1.0, 2.0)], "a small run")  # a tuple has no verdict to take away
    assert goal_lines([("speed", 2.5, 2.0)]) == goal_lines([goal_record("speed", 2.5, 2.0)])


def test_the_bench_re_exports_the_goal_names():
    """lab.bench keeps the names its command line and earlier notebooks import from it."""
    import lab.bench
    import lab.goals

    assert all(getattr(lab.bench, name) is getattr(lab.goals, name) for name in lab.goals.__all__)
