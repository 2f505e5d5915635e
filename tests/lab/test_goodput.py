"""lab.goodput: the best N per batch size, the crossover and vLLM's schedule from a table of goodputs, the prompts of
a batch, the argument checks, and the real pair's committed run (consistent with itself)."""
from __future__ import annotations

import pytest

from lab.goodput import (batch_prompts, batch_schedule, best_n_per_batch, committed_goodput,
                         crossover_batch, measure_goodput)


def test_schedule_and_crossover_from_a_table():
    rows = [{"batch": b, "n_draft": n, "goodput": g} for b, n, g in
            [(1, 0, 10), (1, 2, 15), (1, 4, 16), (2, 0, 19), (2, 2, 25), (2, 4, 22), (4, 0, 30), (4, 2, 30),
             (8, 0, 50), (8, 2, 40)]]
    best = best_n_per_batch(rows)
    assert best == {1: 4, 2: 2, 4: 0, 8: 0}  # a tie goes to the smaller N
    assert crossover_batch(best) == 4
    assert batch_schedule(best) == [[1, 1, 4], [2, 3, 2], [4, 8, 0]]
    assert batch_schedule(best, max_batch=64) == [[1, 1, 4], [2, 3, 2], [4, 64, 0]]
    assert crossover_batch({1: 2, 2: 2}) is None


def test_batch_prompts_cycle_and_checks(pair):
    assert batch_prompts([[1], [2, 3]], 5) == [[1], [2, 3], [1], [2, 3], [1]]
    with pytest.raises(ValueError, match="batch"):
        batch_prompts([[1]], 0)
    with pytest.raises(ValueError, match=r"requests must be an integer in \[1, 65536\], got 0"):
        measure_goodput(pair, [[1, 2]], requests=0)
    # a queue or batch past the cap is refused before any warm-up runs (it was refused as "batch" afterwards)
    with pytest.raises(ValueError, match=r"requests must be an integer in \[1, 65536\], got 100000"):
        measure_goodput(pair, [[1, 2]], requests=100_000)
    with pytest.raises(ValueError, match=r"batch_sizes must be an integer in \[1, 32768\], got 40000"):
        measure_goodput(pair, [[1, 2]], batch_sizes=[1, 40_000])
    with pytest.raises(ValueError, match="drafter must be one of"):
        measure_goodput(pair, [[1, 2]], drafter="oracle")
    with pytest.raises(ValueError, match="n_values"):
        measure_goodput(pair, [[1, 2]], n_values=[-1])
    with pytest.raises(ValueError, match="max_new_tokens"):
        measure_goodput(pair, [[1, 2]], max_new_tokens=10 ** 6)


def test_the_real_pairs_committed_run_is_consistent_with_itself():
    """lab/assets/smollm2-135m/goodput.json (python -m lab bench --batch --json): every batch size x N timed, the
    crossover and the schedule derived from its own rows, the machine named."""
    run = committed_goodput("smollm2-135m")
    if run is None:
        pytest.skip("no committed goodput run for the real pair")
    result = run["goodput"]
    s = result["settings"]
    assert {(r["batch"], r["n_draft"]) for r in result["rows"]} == {(b, n) for b in s["batch_sizes"]
                                                                     for n in s["n_values"]}
    best = best_n_per_batch(result["rows"])
    assert {int(b): n for b, n in result["best"].items()} == best
    assert result["crossover"] == crossover_batch(best)
    assert result["schedule"] == batch_schedule(best)
    assert s["processor"] and s["dtype"] and s["threads"] >= 1 and "busy" in result["load"]
    assert run["command"].startswith("python -m lab bench --batch")
    assert committed_goodput("shakespeare") is None


def test_a_committed_goodput_file_of_another_shape_is_named(tmp_path, monkeypatch):
    import lab.assets

    monkeypatch.setattr(lab.assets, "PAIR_DIR", tmp_path / "shakespeare")
    (tmp_path / "mine").mkdir()
    path = tmp_path / "mine" / "goodput.json"
    for wrong in ('{"goodput": []}', '{"goodput": {"best": {}}}', '[]'):
        path.write_text(wrong)
        with pytest.raises(ValueError, match="goodput.json: expected .*python -m lab bench --batch --json"):
            committed_goodput("mine")
    path.write_text('{"goodput": {"rows": []}}')
    assert committed_goodput("mine") == {"goodput": {"rows": []}}


def test_the_pairs_card_quotes_the_committed_run():
    """lab/assets/smollm2-135m/README.md's goodput section states the committed run's numbers: the N = 2 and N = 4
    gains per batch size, the crossover, the schedule and the growth of autoregressive goodput."""
    from lab.assets import PAIR_DIR

    run = committed_goodput("smollm2-135m")
    if run is None:
        pytest.skip("no committed goodput run for the real pair")
    result = run["goodput"]
    card = " ".join((PAIR_DIR.parent / "smollm2-135m" / "README.md").read_text().split())
    rows = {(r["batch"], r["n_draft"]): r for r in result["rows"]}
    sizes = result["settings"]["batch_sizes"]
    assert sizes == [1, 2, 4, 8, 16] and result["settings"]["scheduling"] == "continuous batching"
    x = {n: [f"{rows[(b, n)]['vs_autoregressive']:.2f}×" for b in sizes] for n in (2, 4)}
    assert (f"{x[2][0]} at batch 1 (N = 2), {x[2][1]} at 2, {x[2][2]} at 4, then a loss: {x[2][3]} at 8 and "
            f"{x[2][4]} at 16 (N = 4: {', '.join(x[4])})") in card
    assert f"The crossover is batch {result['crossover']} and the schedule `{result['schedule']}`" in card
    first, last = rows[(1, 0)]["goodput"], rows[(16, 0)]["goodput"]
    assert f"grows {last / first:.1f}-fold from batch 1 to 16 ({first:.1f} to {last:.1f} tokens/s)" in card
    assert f"acceptance rate {rows[(1, 2)]['acceptance_rate']:.2f} at N = 2" in card
    assert f"on {run['date'].split()[0]} ({run['date'].split()[1].replace('-', '–')} UTC)" in card


def test_best_n_per_batch_names_rows_it_cannot_read():
    for bad, words in ((None, ", a list of dicts, got NoneType"), ("rows", ", a list of dicts, got str"),
                       ([{"batch": 1}], r": dicts holding batch and n_draft, got \{'batch': 1\}")):
        with pytest.raises(TypeError, match=r"rows must be measure_goodput\(...\)\['rows'\]" + words):
            best_n_per_batch(bad)


def test_the_readers_of_a_best_n_name_what_they_were_given():
    from lab.goodput import format_goodput

    for call in (lambda: crossover_batch(None), lambda: batch_schedule([1])):
        with pytest.raises(TypeError, match=r"best must be best_n_per_batch\(...\)'s dict"):
            call()
    with pytest.raises(TypeError, match=r"result must be measure_goodput\(...\)'s dict, with settings and rows"):
        format_goodput(None)
    assert batch_schedule({1: 2, 4: 0}) == [[1, 3, 2], [4, 4, 0]] and crossover_batch({1: 2, 4: 0}) == 4


def test_the_best_n_is_taken_only_where_n_0_ran_beside_it():
    """A batch size without a finite N = 0 goodput has no best N (it was compared with nothing), and NaN never
    wins: the schedule and crossover then speak only for batch sizes that were compared."""
    rows = [{"batch": 1, "n_draft": 0, "goodput": 10.0}, {"batch": 1, "n_draft": 2, "goodput": 15.0},
            {"batch": 2, "n_draft": 0, "goodput": float("nan")}, {"batch": 2, "n_draft": 2, "goodput": 15.0},
            {"batch": 8, "n_draft": 2, "goodput": 9.0}]
    assert best_n_per_batch(rows) == {1: 2}
    assert crossover_batch(best_n_per_batch(rows)) is None
    # an N > 0 that drafted nothing (bench --batch --max-new-tokens 1) is autoregressive decoding timed twice: its
    # noise picked "best N = 1" and a schedule before
    undrafted = [{"batch": 1, "n_draft": 0, "goodput": 10.0}, {"batch": 1, "n_draft": 1, "goodput": 10.2,
                                                                 "drafted_tokens": 0}]
    assert best_n_per_batch(undrafted) == {}
    assert best_n_per_batch([*undrafted, {"batch": 1, "n_draft": 2, "goodput": 9.0, "drafted_tokens": 40}]) == {1: 0}


def test_an_n_wins_only_when_its_goodput_is_ahead_of_n_0s_and_it_accepted_drafts():
    """Within the course's 3 % of N = 0 (lab.compare.LEVEL) speculation buys nothing measurable: N = 0 stays. A row
    that accepted no draft emits one token a call, as N = 0 does: an instructor's 8-token run picked it at 1.02x."""
    rows = [{"batch": 1, "n_draft": 0, "goodput": 31.7}, {"batch": 1, "n_draft": 2, "goodput": 32.5,
                                                           "acceptance_rate": 0.0, "drafted_tokens": 14}]
    assert best_n_per_batch(rows) == {}  # compared with nothing that drafted usefully: no best N at all
    level = [{"batch": 1, "n_draft": 0, "goodput": 100.0}, {"batch": 1, "n_draft": 2, "goodput": 102.9,
                                                             "acceptance_rate": 0.3}]
    assert best_n_per_batch(level) == {1: 0}
    ahead = [*level, {"batch": 1, "n_draft": 4, "goodput": 103.1, "acceptance_rate": 0.2}]
    assert best_n_per_batch(ahead) == {1: 4}  # 3.1 % above N = 0: ahead of it


@pytest.mark.parametrize("kwargs, message", [
    ({"n_values": [0]}, r"n_values must hold 0 .* and at least one N > 0"),
    ({"n_values": [2, 4]}, r"n_values must hold 0"),
    ({"batch_sizes": 4}, r"batch_sizes must be a list of integers, got int 4"),
    ({"batch_sizes": [2, 16], "requests": 2}, r"requests must be an integer >= 16 \(the largest batch size\), "
                                              r"got 2")])
def test_goodput_refuses_what_it_could_not_compare(pair, kwargs, message):
    with pytest.raises(ValueError, match=message):
        measure_goodput(pair, [pair.encode("ROMEO:")], **kwargs)
    with pytest.raises(ValueError, match="encoded must hold at least one prompt"):
        measure_goodput(pair, [])


def test_tokens_per_target_call_leaves_out_the_prefills_first_tokens(pair):
    """Autoregressive decoding commits one token per row per forward; counting each request's first token (the
    prefill's) gave 1.33 here."""
    result = measure_goodput(pair, [pair.encode("ROMEO:"), pair.encode("JULIET:")], batch_sizes=[1, 2],
                             n_values=[0, 2], max_new_tokens=4, requests=2)
    assert all(r["tokens_per_target_call"] == 1.0 for r in result["rows"] if r["n_draft"] == 0)
    assert all(r["tokens_per_target_call"] >= 1.0 for r in result["rows"])


def test_a_run_that_drafted_nothing_gives_no_best_n_crossover_or_schedule(pair):
    """With one new token per request no N > 0 drafts: `bench --batch --max-new-tokens 1` printed a best N, a
    crossover and a vLLM schedule read from timing noise."""
    from lab.goodput import format_goodput

    result = measure_goodput(pair, [pair.encode("ROMEO:"), pair.encode("JULIET:")], batch_sizes=[1, 2],
                             n_values=[0, 1], max_new_tokens=1, requests=2)
    assert all(r["drafted_tokens"] == 0 for r in result["rows"])
    assert result["best"] == {} and result["crossover"] is None and result["schedule"] is None
    text = format_goodput(result)
    assert "no best N, crossover or schedule: no N > 0 had a draft accepted" in text and "num_speculative" not in text
