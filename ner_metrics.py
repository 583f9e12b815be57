"""Entity-level precision / recall / F1 as the CoNLL shared tasks score them (conlleval).

An entity counts as found only when the predicted entity has the same type and
both the same first and last word as a gold entity. Entities are read from tag
sequences with conlleval's rules for where a chunk starts and ends, which read
IOB1 (`I-` opens an entity unless it continues one of the same type), IOB2 (`B-`
opens every entity) and IOBES alike: the same entities give the same score,
whatever the scheme. Sentence boundaries end every entity.
"""
import collections

Entity = collections.namedtuple("Entity", "type start end")  # end: last word, inclusive


def _split(tag):
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', ''); a tag without a prefix is its own type."""
    if tag in (None, "", "O"):
        return "O", ""
    prefix, dash, kind = tag.partition("-")
    if not dash:
        return "I", tag
    return prefix, kind


def _ends(previous, prefix, previous_type, kind):
    """Whether an entity open at the previous word ends before this word."""
    if previous in ("E", "S"):
        return True
    if previous in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return previous not in ("O", ".") and previous_type != kind


def _starts(previous, prefix, previous_type, kind):
    """Whether an entity starts at this word."""
    if prefix in ("B", "S"):
        return True
    if previous in ("E", "S", "O") and prefix in ("E", "I"):
        return True
    return prefix not in ("O", ".") and previous_type != kind


def entities(tags):
    """The entities of one sentence's tags, as a set of Entity."""
    found = set()
    previous, previous_type, start = "O", "", None
    for index, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = _split(tag)
        if start is not None and _ends(previous, prefix, previous_type, kind):
            found.add(Entity(previous_type, start, index - 1))
            start = None
        if _starts(previous, prefix, previous_type, kind):
            start = index
        previous, previous_type = prefix, kind
    return found


def _prf(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def score(gold_sentences, predicted_sentences):
    """conlleval's scores of predicted tag sequences against gold ones.

    Returns:
      {"precision", "recall", "f1", "accuracy" (per word), "per_type": {type:
      (precision, recall, f1, number of gold entities)}}, fractions in [0, 1].
    """
    counts = collections.defaultdict(lambda: [0, 0, 0])  # type -> correct, predicted, gold
    words = right = 0
    for gold, predicted in zip(gold_sentences, predicted_sentences):
        if len(gold) != len(predicted):
            raise ValueError("a sentence has %d gold tags and %d predicted tags"
                             % (len(gold), len(predicted)))
        words += len(gold)
        right += sum(g == p for g, p in zip(gold, predicted))
        gold_entities, predicted_entities = entities(gold), entities(predicted)
        for entity in gold_entities:
            counts[entity.type][2] += 1
        for entity in predicted_entities:
            counts[entity.type][1] += 1
            if entity in gold_entities:
                counts[entity.type][0] += 1
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    precision, recall, f1 = _prf(*totals)
    per_type = {kind: _prf(*c) + (c[2],) for kind, c in sorted(counts.items())}
    return {"precision": precision, "recall": recall, "f1": f1,
            "accuracy": right / words if words else 0.0, "per_type": per_type}
