"""Whether text drawn for a narrow terminal split a word: compare it with the same text
unwrapped (issue 12's 80-column tests)."""

from __future__ import annotations

PUNCT = "()[]{},;:.'\"`"


def tokens(text: str) -> set[str]:
    return {t.strip(PUNCT) for t in text.split()} - {""}


def cut_words(shown: str, whole: str) -> list[str]:
    """Tokens of ``shown`` that are not words of ``whole`` but the start of one whose rest
    begins a token of the next line, or the end of one whose start ends a token of the line
    before (a word wrapped mid-word, within a table cell too: the two pieces are on
    consecutive lines).  ``whole`` may be another run's text: a word that only one run has (a
    verdict's own words) is not a cut unless a piece of the rest of it sits beside it.
    Tokens without a letter (numbers that differ between two runs) are not compared."""
    vocab = tokens(whole)
    lines = [tokens(line) for line in shown.splitlines()]
    cut: set[str] = set()
    for i, here in enumerate(lines):
        after = lines[i + 1] if i + 1 < len(lines) else set()
        for t in here - vocab:
            if len(t) < 2 or not any(c.isalpha() for c in t):
                continue
            for u in after:
                joined = t + u
                if any(w.startswith(joined) for w in vocab if len(w) > len(t)):
                    cut.update((t, u))
    return sorted(cut)
