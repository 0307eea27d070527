"""Whether text drawn for a narrow terminal split a word: compare it with the same text
unwrapped (issue 12's 80-column tests)."""

from __future__ import annotations

PUNCT = "()[]{},;:.'\"`"


def tokens(text: str) -> set[str]:
    return {t.strip(PUNCT) for t in text.split()} - {""}


def cut_words(shown: str, whole: str) -> list[str]:
    """Tokens of ``shown`` that are not words of ``whole`` but the start or the end of one (a
    word wrapped mid-word).  Tokens without a letter (numbers that differ between two runs)
    are not compared."""
    vocab = tokens(whole)
    cut = []
    for t in sorted(tokens(shown) - vocab):
        if len(t) < 2 or not any(c.isalpha() for c in t):
            continue
        if any(len(w) > len(t) and (w.startswith(t) or w.endswith(t)) for w in vocab):
            cut.append(t)
    return cut
