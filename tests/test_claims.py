import json

import numpy as np
import pytest
from matplotlib.colors import to_hex

from dprl.claims import (NULL_LEVEL, CountRule, agreement_tail, cell_test_rate, claim, collect,
                         net_count_tail)


def test_claim_prints_a_verdict_line_the_scorecard_collects(tmp_path, capsys):
    verdict = claim("Balle 2016", "noise vanishes as m grows", True, sigma=0.012345678, m=100)
    line = capsys.readouterr().out.strip()
    assert line == "CLAIM [Balle 2016] HOLDS: noise vanishes as m grows | sigma=0.01235, m=100"
    claim("book", "a partial one", False, partly=True, ratio=2.0)
    partial = capsys.readouterr().out
    chapter = tmp_path / "part" / "chapter.ipynb"
    chapter.parent.mkdir()
    chapter.write_text(json.dumps({"cells": [
        {"cell_type": "code", "outputs": [
            {"output_type": "stream", "name": "stdout", "text": ["intro\n", line + "\n"]},
            {"output_type": "stream", "name": "stdout", "text": partial}]},
        {"cell_type": "markdown", "source": "CLAIM [x] HOLDS: not an output | a=1"}]}))
    found = collect(tmp_path)
    assert [v.verdict for v in found] == ["HOLDS", "PARTIAL"]
    assert found[0].chapter == "part/chapter" and found[0].numbers == verdict.numbers


@pytest.mark.parametrize("holds, statement", [("MAYBE", "s"), (True, ""), (True, "a | b")])
def test_bad_claims_are_rejected(holds, statement):
    with pytest.raises(ValueError):
        claim("book", statement, holds)


@pytest.mark.parametrize("holds, partly", [("HOLDS", False), ("PARTIAL", True), (1, False),
                                           (True, "PARTIAL"), (False, None)])
def test_a_verdict_cannot_be_named_only_computed(holds, partly):
    with pytest.raises(ValueError, match="holds|partly"):
        claim("book", "s", holds, partly=partly)


@pytest.mark.parametrize("holds, partly, verdict", [
    (True, True, "HOLDS"), (True, False, "HOLDS"), (False, True, "PARTIAL"),
    (False, False, "FAILS")])
def test_every_verdict_is_reachable(holds, partly, verdict, capsys):
    assert claim("book", "s", holds, partly=partly).verdict == verdict


def test_a_verdict_displays_nothing_in_a_notebook(capsys):
    verdict = claim("book", "s", True)
    assert verdict._ipython_display_() is None


def test_numpy_booleans_and_numbers_are_accepted(capsys):
    import numpy as np

    verdict = claim("book", "numpy comparison", np.float64(0.5) < 1, ratio=np.float64(1 / 3))
    assert verdict.verdict == "HOLDS" and verdict.numbers == "ratio=0.3333"


@pytest.mark.parametrize("source, statement, numbers", [
    ("Balle [2016]", "s", {}), ("book", "two\nlines", {}), ("book", "s", {"a": "x\ny"})])
def test_claims_the_scorecard_could_not_collect_are_rejected(source, statement, numbers):
    with pytest.raises(ValueError):
        claim(source, statement, True, **numbers)


def test_scorecard_counts_verdicts_by_source():
    from dprl.claims import Verdict, scorecard

    table = scorecard([Verdict("A", "s1", "HOLDS", "x=1", "c1"), Verdict("A", "s2", "FAILS", "",
                                                                          "c2"),
                       Verdict("B", "s3", "PARTIAL", "", "c3")])
    assert table.columns == ("source", "holds", "fails", "partial", "claims")
    assert table.rows == (("A", 1, 1, 0, 2), ("B", 0, 0, 1, 1), ("all", 1, 1, 1, 3))
    assert scorecard([]).rows == (("all", 0, 0, 0, 0),)


def test_changes_lists_changed_new_and_retired_verdicts(tmp_path):
    from dprl.claims import Verdict, changes, load_verdicts, save_verdicts

    before = [Verdict("A", "s1", "HOLDS", "", "c"), Verdict("A", "s2", "FAILS", "", "c"),
              Verdict("A", "gone", "HOLDS", "", "c")]
    after = [Verdict("A", "s1", "PARTIAL", "x=1", "c"), Verdict("A", "s2", "FAILS", "y=2", "c"),
             Verdict("B", "new", "FAILS", "", "d")]
    save_verdicts(before, tmp_path / "v.json", "abc")
    commit, loaded = load_verdicts(tmp_path / "v.json")
    assert commit == "abc" and loaded == before
    found = {(old and old.statement, new and new.statement): (old and old.verdict,
                                                               new and new.verdict)
             for old, new in changes(loaded, after)}
    assert found == {("s1", "s1"): ("HOLDS", "PARTIAL"), ("gone", None): ("HOLDS", None),
                     (None, "new"): (None, "FAILS")}
    with pytest.raises(ValueError, match="share"):
        changes(before + before[:1], after)


def test_claims_carry_the_papers_section(tmp_path, capsys):
    verdict = claim("Balle 2016", "DP curves meet the non-private ones", False, partly=True,
                    section="Sec. 6", m=1000)
    line = capsys.readouterr().out.strip()
    assert line == "CLAIM [Balle 2016, Sec. 6] PARTIAL: DP curves meet the non-private ones | m=1000"
    chapter = tmp_path / "c.ipynb"
    chapter.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": line + "\n"}]}]}))
    (found,) = collect(tmp_path)
    assert (found.source, found.section, found.verdict) == ("Balle 2016", "Sec. 6", "PARTIAL")
    assert found.numbers == verdict.numbers
    with pytest.raises(ValueError, match="commas"):
        claim("Balle, 2016", "s", True)


def test_verdict_table_links_each_verdict_to_its_section_and_hides_the_numbers():
    from dprl.claims import Verdict, verdict_table

    verdicts = [Verdict("Balle 2016", "s2 <b>", "FAILS", "x=1", "balle2016/b", "Sec. 6", "sec-b"),
                Verdict("Balle 2016", "s1", "HOLDS", "y=2", "balle2016/a", "", "sec-a"),
                Verdict("book", "s3", "HOLDS", "", "primer/c")]
    table = verdict_table(verdicts, "Balle 2016")
    page = table._repr_html_()
    assert page.count("<tr>") == 3 and "primer/c" not in page  # a header and two claims
    assert page.index('href="../balle2016/a.html#sec-a"') < page.index(
        'href="../balle2016/b.html#sec-b"')  # by chapter
    assert "<details><summary>balle2016/b</summary>x=1</details>" in page
    assert "s2 &lt;b&gt;" in page and "x=1" not in repr(table)
    assert repr(table).splitlines()[0].split() == ["verdict", "section", "claim", "chapter"]
    with pytest.raises(ValueError, match="source"):
        verdict_table(verdicts, "Wang 2019")


def test_collect_records_the_section_of_each_verdict(tmp_path, capsys):
    from dprl.claims import verdict_table

    claim("book", "a claim", True, a=1)
    line = capsys.readouterr().out
    (tmp_path / "c.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "outputs": [{"output_type": "stream", "text": line}]},
        {"cell_type": "markdown", "source": "# Title\n\n## The *eps* of $m$ runs\ntext"},
        {"cell_type": "markdown", "source": "no heading here"},
        {"cell_type": "code", "outputs": [{"output_type": "stream", "text": line}]}]}))
    found = collect(tmp_path)
    assert [v.anchor for v in found] == ["", "the-eps-of-m-runs"]
    assert found[0].section == ""  # a claim made in no section of its source
    assert "<td></td>" in verdict_table(found, "book")._repr_html_()


def test_scorecard_figure_draws_one_bar_segment_per_source_and_verdict():
    from dprl.claims import VERDICT_COLOURS, Verdict, scorecard_figure

    fig = scorecard_figure([Verdict("A", "s1", "HOLDS", ""), Verdict("A", "s2", "FAILS", ""),
                            Verdict("B", "s3", "HOLDS", "")])
    (ax,) = fig.axes
    widths = {(p.get_y(), to_hex(p.get_facecolor())): p.get_width() for p in ax.patches}
    assert sorted(widths.values()) == [0, 0, 0, 1, 1, 1]
    assert {colour for _, colour in widths} == {c.lower() for c in VERDICT_COLOURS.values()}
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["holds", "fails", "partial"]


# --- criteria that chance cannot pass (issue 28) ---------------------------------------------



def test_cell_test_rate_is_the_rate_of_significant_gaps_without_effect():
    rng = np.random.default_rng(0)
    gaps = rng.normal(size=(400_000, 3))
    mean, se = gaps.mean(axis=1), gaps.std(axis=1, ddof=1) / np.sqrt(3)
    simulated = np.mean(mean >= 2 * se)
    assert abs(simulated - cell_test_rate(3)) < 4 * np.sqrt(0.09 * 0.91 / 400_000)
    assert cell_test_rate(3) == pytest.approx(0.09175, abs=1e-5)
    with pytest.raises(ValueError, match="n_seeds"):
        cell_test_rate(1)


def test_net_count_tail_against_enumeration_by_simulation():
    rng = np.random.default_rng(1)
    n, rate = 12, cell_test_rate(3)
    outcomes = rng.multinomial(n, [rate, rate, 1 - 2 * rate], size=200_000)
    net = outcomes[:, 0] - outcomes[:, 1]
    for k in (1, 2, 3, 4):
        p = net_count_tail(n, rate, k)
        assert abs(np.mean(net >= k) - p) < 4 * np.sqrt(p * (1 - p) / 200_000) + 1e-4
    assert net_count_tail(n, rate, -n) == pytest.approx(1.0)


@pytest.mark.parametrize("cells", [3, 6, 12, 18])
def test_count_rule_passes_no_effect_at_most_at_its_level(cells):
    """Simulated under the null (every cell a chance win or loss at the per-cell rate of a
    3-seed t test at 2 s.e.), PARTIAL or better comes out at the stated rate, <= 5 %."""
    rate = cell_test_rate(3)
    rng = np.random.default_rng(cells)
    outcomes = rng.multinomial(cells, [rate, rate, 1 - 2 * rate], size=100_000)
    rule = {(int(w), int(l)): CountRule(int(w), int(l), cells, rate).partly
            for w, l in np.unique(outcomes[:, :2], axis=0)}  # a function of (wins, losses)
    rejected = np.mean([rule[int(w), int(l)] for w, l in outcomes[:, :2]])
    stated = CountRule(0, 0, cells, rate).null_probability
    assert stated <= NULL_LEVEL
    assert abs(rejected - stated) < 4 * np.sqrt(max(stated, 1e-4) / 100_000) + 1e-4


def test_count_rule_reaches_every_verdict_and_counts_losses_against():
    rate = cell_test_rate(3)
    assert CountRule(12, 0, 12, rate).holds
    assert CountRule(4, 0, 12, rate).partly and not CountRule(4, 0, 12, rate).holds
    assert not CountRule(4, 2, 12, rate).partly  # two significant losses cancel two wins
    assert not CountRule(9, 1, 12, rate).holds and CountRule(9, 1, 12, rate).partly
    assert not CountRule(1, 0, 12, rate).partly
    tiny = CountRule(1, 0, 1, rate)  # one cell: a win at 9 % cannot decide
    assert tiny.threshold is None and not tiny.partly and tiny.null_probability == 0
    assert "unreachable" in str(tiny.numbers()["net_needed"])


def test_agreement_tail_is_a_poisson_binomial():
    from scipy.stats import binom

    assert agreement_tail([0.2] * 12, 5) == pytest.approx(binom.sf(4, 12, 0.2))
    assert agreement_tail([0.5, 0.25], 2) == pytest.approx(0.125)
    assert agreement_tail([0.5], 3) == 0.0 and agreement_tail([0.3], 0) == pytest.approx(1.0)
