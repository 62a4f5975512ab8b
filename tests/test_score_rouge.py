"""ROUGE-L as an instrument: the reference package's numbers on real text, and moves a reader can predict
(the same text re-paragraphed: no move; a changed figure: a small one; sections reversed: a large one)."""

from __future__ import annotations

import pytest
from rouge_score import rouge_scorer

from schemas.scoring import ScoreSettings
from tasks.score import registry
from tasks.score.metric import JudgeEnv
from tasks.score.rouge import rouge_l
from tests.conftest import CORPUS, arxiv_rows

pytestmark = pytest.mark.skipif(not (CORPUS / "arxiv").is_dir(), reason="shared corpus not found")


@pytest.fixture(scope="module")
def paper_sections() -> list[str]:
    """The sections of a real paper of the corpus (its first in the MANIFEST), as Markdown."""
    from tasks.sources import ground_source

    row = arxiv_rows()[0]
    md = next(
        iter(ground_source((CORPUS / "arxiv" / row["path"]).read_bytes(), row["path"]).markdown.values())
    )
    parts = ["## " + p for p in md.split("\n## ")[1:] if len(p.split()) > 80]
    assert len(parts) >= 4
    return parts[:6]


def test_equals_the_reference_package_on_real_text(paper_sections):
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    pairs = [
        (paper_sections[0], paper_sections[1]),
        ("\n\n".join(paper_sections), "\n\n".join(paper_sections[::2])),
    ]
    for gold, generated in pairs:
        want = scorer.score(gold, generated)["rougeL"]  # rouge-score takes (target, prediction)
        got = rouge_l(gold, generated)
        assert (got.precision, got.recall, got.f1) == pytest.approx(
            (want.precision, want.recall, want.fmeasure)
        )


def test_moves_as_a_reader_expects(paper_sections):
    gold = "\n\n".join(paper_sections)
    assert rouge_l(gold, gold).f1 == 1.0
    # re-paragraphed: every line of a section joined, paragraphs split elsewhere, the same words in order
    words = gold.split()
    reflowed = "\n\n".join(" ".join(words[i : i + 37]) for i in range(0, len(words), 37))
    assert rouge_l(gold, reflowed).f1 == 1.0
    # one figure changed: one token of thousands
    figure = "In 2019 revenue rose 12 percent to 431 million."
    changed = figure.replace("431", "913")
    small = rouge_l(gold + "\n\n" + figure, gold + "\n\n" + changed).f1
    assert 0.99 < small < 1.0
    # the sections in reverse order: most of the common subsequence is lost
    reversed_order = "\n\n".join(paper_sections[::-1])
    assert rouge_l(gold, reversed_order).f1 < 0.5
    assert rouge_l(gold, "").f1 == 0.0 and rouge_l("", gold).f1 == 0.0


def test_is_a_registered_family_with_its_detail(paper_sections):
    fam = registry.build("rouge", JudgeEnv(ScoreSettings(), None, CORPUS))
    gold, generated = paper_sections[0], paper_sections[0] + "\n\n" + paper_sections[1]
    [res] = fam.score(fam.inputs("i", generated, 0, gold=gold))
    assert res.metric == "rouge_l" and res.value == pytest.approx(rouge_l(gold, generated).f1)
    assert res.detail["recall"] == 1.0 and res.detail["precision"] < 1.0  # all of Y, and more
