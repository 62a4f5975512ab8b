"""ROUGE-L (Lin, 2004) of two whole texts: precision, recall and F1 of their longest common subsequence of
tokens. Tokens are rouge-score's (lower-cased alphanumeric runs, Porter-stemmed), the reference package's
own tokenizer; the LCS comes from rapidfuzz (C++), which gives rouge-score's numbers about 50 times faster
on reports of thousands of words (tests/test_score_rouge.py checks them against rouge-score itself)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from rapidfuzz.distance import LCSseq


@dataclass(frozen=True)
class RougeL:
    precision: float  # LCS / tokens of R'
    recall: float  # LCS / tokens of Y
    f1: float
    lcs: int
    generated_tokens: int
    gold_tokens: int


@cache
def _tokenizer():
    from rouge_score import tokenizers

    return tokenizers.DefaultTokenizer(use_stemmer=True)


def tokens(text: str) -> list[str]:
    return _tokenizer().tokenize(text)


def rouge_l(gold: str, generated: str) -> RougeL:
    """ROUGE-L of `generated` against the reference `gold` (both 0 tokens: all 0)."""
    ref, cand = tokens(gold), tokens(generated)
    lcs = int(LCSseq.similarity(ref, cand)) if ref and cand else 0
    p = lcs / len(cand) if cand else 0.0
    r = lcs / len(ref) if ref else 0.0
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return RougeL(p, r, f1, lcs, len(cand), len(ref))
