import json

import pytest

from dprl.claims import claim, collect


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


def test_scorecard_groups_by_source():
    from dprl.claims import Verdict, scorecard

    table = scorecard([Verdict("A", "s1", "HOLDS", "x=1", "c1"), Verdict("A", "s2", "FAILS", "",
                                                                          "c2")])
    assert table.splitlines()[0] == "A: 2 claims (1 holds, 1 fails, 0 partial)"
    assert scorecard([]) == "no claims evaluated yet"


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


def test_scorecard_table_has_one_row_per_claim():
    from dprl.claims import Verdict, scorecard_table

    table = scorecard_table([Verdict("Balle 2016", "s1", "FAILS", "x=1", "balle2016/a", "Sec. 6"),
                             Verdict("book", "s2", "HOLDS", "", "primer/b")])
    lines = table.splitlines()
    assert lines[0] == "| paper | section | claim | verdict | numbers | chapter |"
    assert lines[2] == "| Balle 2016 | Sec. 6 | s1 | **FAILS** | x=1 | balle2016/a |"
    assert len(lines) == 4 and scorecard_table([]) == "no claims evaluated yet"
