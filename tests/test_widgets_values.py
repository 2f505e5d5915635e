"""Widget state that a learner reads: escaped chart titles, the colours of resampled and bonus tokens, tokens per
call with truncated steps, the speedup explorer's slider range, best-N marker and timeline; and
lab.kv.keep_positions refusing repeated or negative offsets."""
import pytest

from lab.trace import StepRecord
from widgets._style import BONUS_COLOR, RESAMPLED_COLOR, tint
from widgets.speedup import SpeedupExplorer
from widgets.token_stream import TokenStream

VOCAB = ["<b>x</b>", " the", " cat", " sat"]


class Tok:
    def decode(self, ids):
        return "".join(VOCAB[i] for i in ids)


def step(index, drafted, num_accepted, emitted, last_kind, **fields):
    return StepRecord(index=index, position=0, drafted=drafted, num_accepted=num_accepted, emitted=emitted,
                      last_kind=last_kind, **fields)


# the chart title names the selected token: its text is escaped there too (plotly renders some tags).
def test_chart_title_escapes_the_token_text():
    stream = TokenStream(Tok())
    stream(step(0, [1], 0, [0], "resampled"))
    stream.select(0)
    title = stream.chart.layout.title.text
    assert title == "position 0: &lt;b&gt;x&lt;/b&gt; (resampled)", title


# a resampled token wears the resampled (residual) colour, a bonus token the bonus (target) colour.
def test_resampled_and_bonus_tokens_have_their_own_colours():
    stream = TokenStream(Tok())
    stream(step(0, [1], 0, [2], "resampled"))
    stream(step(1, [3], 1, [3, 1], "bonus"))
    spans = {kind: part for part in stream.html.split("<span")[1:]
             for kind in ("resampled", "bonus") if part.startswith(f' class="sdl-{kind}"')}
    assert f"background: {tint(RESAMPLED_COLOR)}" in spans["resampled"]
    assert f"border-bottom: 2px solid {RESAMPLED_COLOR}" in spans["resampled"]
    assert BONUS_COLOR not in spans["resampled"]
    assert f"border-bottom: 2px solid {BONUS_COLOR}" in spans["bonus"] and RESAMPLED_COLOR not in spans["bonus"]
    from widgets.token_stream import _VIEW_CSS
    resampled_rule = next(line for line in _VIEW_CSS.splitlines() if line.startswith(".sdl-resampled"))
    assert RESAMPLED_COLOR in resampled_rule and BONUS_COLOR not in resampled_rule


# tokens per target call counts what was emitted, also when EOS / max_new_tokens cut a step short.
def test_stats_count_emitted_tokens_of_a_truncated_step():
    stream = TokenStream(Tok())
    stream(step(0, [1, 2, 3], 1, [1, 0], "resampled"))
    stream(step(1, [1, 2, 3], 3, [1, 2], "bonus", truncated=True))   # 3 accepted, only 2 made it out
    stats = stream.stats
    assert stats["emitted"] == 4 and stats["accepted"] == 4 and stats["steps"] == 2
    assert stats["tokens_per_target_call"] == 2.0                        # 4 emitted / 2 calls, not (4 + 2) / 2
    assert "2.00 tokens per target call" in stream.stats_text


# the N slider reaches max_n (the explorer's own range), and set(n_draft=max_n) lands there.
def test_speedup_explorer_slider_covers_one_to_max_n():
    ex = SpeedupExplorer(max_n=12)
    assert (ex.n_slider.min, ex.n_slider.max) == (1, 12)
    ex.set(n_draft=12)
    assert ex.n_draft == 12 and ex.curve.data[2].x == (12,)


# the best-N star sits on the curve at best N, at the curve's maximum.
def test_best_n_marker_sits_on_the_curve_maximum():
    ex = SpeedupExplorer(alpha=0.75, n_draft=5, cost_ratio=0.1)
    curve = list(ex.curve.data[0].y)
    best = ex.best_n
    assert ex.curve.data[3].x == (best,)
    assert ex.curve.data[3].y == (curve[best - 1],) and curve[best - 1] == max(curve)
    assert ex.curve.data[2].y == (curve[ex.n_draft - 1],)


# no sliver of a draft bar at the horizon from float round-off (N = 6, c = 0.2: 5 full rounds + 5 drafts).
def test_timeline_has_no_zero_width_draft_bar_at_the_horizon():
    ex = SpeedupExplorer(alpha=0.75, n_draft=6, cost_ratio=0.2)
    widths = list(ex.timeline.data[1].x)
    assert len(widths) == 5 * 6 + 5
    assert min(widths) == pytest.approx(0.2)


# keep_positions refuses repeated and negative offsets (they would duplicate or pull in prefix slots).
@pytest.fixture()
def filled_cache(target):
    """A cache holding 6 positions of the tiny conftest target."""
    from lab.models import forward, new_cache

    cache = new_cache()
    forward(target, [1, 2, 3, 4, 5, 6], cache)
    return cache


@pytest.mark.parametrize("keep", [[1, 1], [0, 2, 2], [-1, 0], [-2, 1]])
def test_keep_positions_rejects_repeated_and_negative_offsets(filled_cache, keep):
    from lab.kv import cache_length, keep_positions

    with pytest.raises(ValueError, match="keep must be increasing offsets"):
        keep_positions(filled_cache, 2, keep)
    assert cache_length(filled_cache) == 6   # untouched
