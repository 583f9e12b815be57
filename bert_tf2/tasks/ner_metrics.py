"""Entity-level precision / recall / F1 as the CoNLL shared tasks score them (conlleval).

This is conlleval.pl's count, word by word over the whole file: an entity is found
where a chunk starts (by conlleval's rules for where chunks start and end), and it is
right when the predicted and the gold chunk start at the same word with the same type
and end together. The rules read IOB1 (`I-` opens an entity unless it continues one
of the same type), IOB2 (`B-` opens every entity) and IOBES (`E-` and `S-` end one,
read as seqeval reads them) alike: the same entities give the same score, whatever
the scheme. Sentence boundaries end every entity of a typed tag.

Tags without a `-` other than "O" (a bare `PER`) are read as conlleval.pl reads them
without its -r flag: as a chunk tag of no type. Such a tag opens a chunk only after a
tag of some type (never after "O" or at a sentence start), and that chunk goes on over
"O" and sentence ends until a typed tag comes: a file of bare tags has no entities.
score() logs a warning when it meets them.
"""
import collections

from absl import logging

Entity = collections.namedtuple("Entity", "type start end")  # end: last word, inclusive

_OUTSIDE = ("O", "")


def _split(tag):
    """conlleval's reading of a tag: 'B-PER' -> ('B', 'PER'), split at the first '-';
    a tag without one ('O', a bare 'PER') is its own prefix, of no type."""
    if tag in (None, ""):
        return _OUTSIDE
    prefix, dash, kind = tag.partition("-")
    return (prefix, kind) if dash else (tag, "")


def _ends(previous, prefix, previous_type, kind):
    """Whether a chunk open at the previous word ends before this word."""
    # "[" and "]" are conlleval's one-word chunks.
    if previous in ("E", "S", "[", "]"):
        return True
    if previous in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return previous not in ("O", ".") and previous_type != kind


def _starts(previous, prefix, previous_type, kind):
    """Whether a chunk starts at this word."""
    if prefix in ("S", "[", "]") or (prefix == "B" and previous in ("B", "I", "O", "E", "S")):
        return True
    if previous in ("E", "S", "O") and prefix in ("E", "I"):
        return True
    return prefix not in ("O", ".") and previous_type != kind


def entities(tags):
    """The entities of one sentence's tags, as a set of Entity.

    An entity ends where conlleval's rules end it, or where the next one starts, or
    at the sentence's last word (a chunk of bare tags, which "O" does not close).
    """
    found = set()
    (previous, previous_type), start, kind_of_open = _OUTSIDE, None, ""
    for index, tag in enumerate(tags):
        prefix, kind = _split(tag)
        starts = _starts(previous, prefix, previous_type, kind)
        if start is not None and (starts or _ends(previous, prefix, previous_type, kind)):
            found.add(Entity(kind_of_open, start, index - 1))
            start = None
        if starts:
            start, kind_of_open = index, kind
        previous, previous_type = prefix, kind
    if start is not None:
        found.add(Entity(kind_of_open, start, len(tags) - 1))
    return found


class _Tally(object):
    """conlleval's counters, fed one word (gold and predicted tag) at a time."""

    def __init__(self):
        self.counts = collections.defaultdict(lambda: [0, 0, 0])  # correct, predicted, gold
        self.last_gold, self.last_guess = _OUTSIDE, _OUTSIDE
        self.matching = False  # both sides are in a chunk that started alike

    def add(self, gold, guess):
        """Counts one word; gold and guess are (prefix, type) pairs from _split."""
        gold_ends = _ends(*self._pair(self.last_gold, gold))
        guess_ends = _ends(*self._pair(self.last_guess, guess))
        if self.matching:
            if gold_ends and guess_ends and self.last_gold[1] == self.last_guess[1]:
                self.counts[self.last_gold[1]][0] += 1
                self.matching = False
            elif gold_ends != guess_ends or gold[1] != guess[1]:
                self.matching = False
        gold_starts = _starts(*self._pair(self.last_gold, gold))
        guess_starts = _starts(*self._pair(self.last_guess, guess))
        if gold_starts and guess_starts and gold[1] == guess[1]:
            self.matching = True
        if gold_starts:
            self.counts[gold[1]][2] += 1
        if guess_starts:
            self.counts[guess[1]][1] += 1
        self.last_gold, self.last_guess = gold, guess

    @staticmethod
    def _pair(last, current):
        """(previous prefix, prefix, previous type, type): _ends' and _starts' arguments."""
        return last[0], current[0], last[1], current[1]

    def close(self):
        """Counts the chunk still matching at the end of the file; returns the counts."""
        if self.matching:
            self.counts[self.last_gold[1]][0] += 1
            self.matching = False
        return self.counts


def _prf(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _warn_about_bare_tags(tags):
    """Logs the tags conlleval reads as chunk tags of no type (see the module doc)."""
    bare = sorted({t for t in tags if t not in (None, "", "O") and "-" not in t})
    if bare:
        logging.warning("tags without a B-/I- prefix (%s) are scored as conlleval.pl scores "
                        "them without -r: they open an entity only after a tag of another "
                        "type, never after O", " ".join(bare))


def score(gold_sentences, predicted_sentences):
    """conlleval's scores of predicted tag sequences against gold ones.

    The sentences are read as conlleval reads a file of them with a blank line after
    each one.

    Returns:
      {"precision", "recall", "f1", "accuracy" (per word), "correct", "predicted",
      "gold" (entity counts), "per_type": {type: (precision, recall, f1, number of
      gold entities)}}, fractions in [0, 1].
    """
    tally = _Tally()
    words = right = 0
    seen = set()
    for gold, predicted in zip(gold_sentences, predicted_sentences):
        if len(gold) != len(predicted):
            raise ValueError("a sentence has %d gold tags and %d predicted tags"
                             % (len(gold), len(predicted)))
        seen.update(gold)
        seen.update(predicted)
        words += len(gold)
        for g, p in zip(gold, predicted):
            g, p = _split(g), _split(p)
            right += g == p
            tally.add(g, p)
        tally.add(_OUTSIDE, _OUTSIDE)  # the blank line
    _warn_about_bare_tags(seen)
    counts = tally.close()
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    precision, recall, f1 = _prf(*totals)
    per_type = {kind: _prf(*c) + (c[2],) for kind, c in sorted(counts.items())}
    return {"precision": precision, "recall": recall, "f1": f1,
            "accuracy": right / words if words else 0.0, "correct": totals[0],
            "predicted": totals[1], "gold": totals[2], "per_type": per_type}
