"""create_pretraining_data's algorithm: documents -> examples -> masks, on any token values.

`Generator` runs the reference's create_instances_from_document and
create_masked_lm_predictions on tokens of any kind (WordPiece strings for the
reference's functions, varint-encoded ids in the fast pipeline: `Symbols` in
pretraining_records.py says which values are special), drawing every random
decision from one `Draws` (pretraining_draws.py) in the reference's order, so
that a seed gives the reference's examples one for one.
"""
import itertools


class Generator(object):
    """Builds the examples of documents, drawing from one random source.

    An example is a tuple (tokens, num_segment_a, positions, labels, is_random_next)
    where tokens = [CLS] A [SEP] B [SEP] after masking, num_segment_a counts the
    tokens with segment id 0 (len(A) + 2), positions are the masked positions in
    increasing order and labels the original tokens there.
    """

    def __init__(self, options, symbols, draws):
        self.options = options
        self.symbols = symbols
        self.draws = draws
        self.max_num_tokens = options.max_seq_length - 3
        # Masked positions wanted for each sequence length (capped by the slots).
        self._budgets = [self._budget(n) for n in range(options.max_seq_length + 1)]

    def _budget(self, length):
        return min(self.options.max_predictions_per_seq,
                   max(1, int(round(length * self.options.masked_lm_prob))))

    # -- the whole corpus ----------------------------------------------------

    def corpus_examples(self, documents, on_document=None):
        """Shuffles `documents` in place, then yields the examples of every pass.

        on_document: called as on_document(num_done) every 1000 documents.
        """
        self.draws.shuffle(documents)
        cls, sep = self.symbols.cls, self.symbols.sep
        # Text from the tokenizer never holds [CLS]/[SEP] (brackets are split off
        # as punctuation), so usually the maskable positions need no search.
        clean = not any(cls in sentence or sep in sentence
                        for document in documents for sentence in document)
        # Whole-word masking: whether each token starts a word, worked out once per
        # sentence rather than in every example that holds it (a byte per token).
        word_starts = None
        if clean and self.options.do_whole_word_mask:
            starts_word = self.symbols.starts_word
            word_starts = [[bytes(map(starts_word, sentence)) for sentence in document]
                           for document in documents]
        done = 0
        for _ in range(self.options.dupe_factor):
            for doc_index in range(len(documents)):
                for example in self.document_examples(documents, doc_index, clean,
                                                      word_starts):
                    yield example
                done += 1
                if on_document is not None and done % 1000 == 0:
                    on_document(done)

    # -- one document -------------------------------------------------------

    def document_examples(self, documents, doc_index, clean=False, word_starts=None):
        """The examples of documents[doc_index]; B segments may come from any document.

        clean: the documents are known to hold no [CLS]/[SEP] token.
        word_starts: None, or (clean documents, whole-word masking) per sentence of
          each document, bytes with 1 where symbols.starts_word(token), else 0.
        """
        draws = self.draws
        document = documents[doc_index]
        target_length = self.max_num_tokens
        # Now and then aim at a shorter sequence, so that pretraining also sees
        # the short inputs of fine-tuning.
        if draws.random() < self.options.short_seq_prob:
            target_length = draws.randint(2, self.max_num_tokens)

        examples = []
        chunk = []
        chunk_length = 0
        i = 0
        last = len(document) - 1
        while i <= last:
            chunk.append(document[i])
            chunk_length += len(document[i])
            if i == last or chunk_length >= target_length:
                example, unused = self._example_from_chunk(
                    chunk, documents, doc_index, target_length, clean, word_starts,
                    i + 1 - len(chunk))
                examples.append(example)
                # Sentences of the chunk that a random B replaced are revisited.
                i -= unused
                chunk = []
                chunk_length = 0
            i += 1
        return examples

    def _example_from_chunk(self, chunk, documents, doc_index, target_length, clean,
                            word_starts=None, first=0):
        """Splits `chunk` into A and a real or random B; returns (example, unused).

        chunk: the sentences documents[doc_index][first:first + len(chunk)].
        """
        draws = self.draws
        split = draws.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
        tokens_a = []
        for sentence in chunk[:split]:
            tokens_a += sentence
        unused = 0
        tokens_b = []
        if len(chunk) == 1 or draws.random() < 0.5:
            is_random_next = True
            source_b = self._random_segment(tokens_b, documents, doc_index,
                                            target_length - len(tokens_a))
            unused = len(chunk) - split
        else:
            is_random_next = False
            for sentence in chunk[split:]:
                tokens_b += sentence
            source_b = doc_index, first + split, len(chunk) - split
        cuts = truncate_pair(tokens_a, tokens_b, self.max_num_tokens, draws.random)
        if not tokens_a or not tokens_b:
            raise AssertionError("a segment became empty while truncating")

        symbols = self.symbols
        tokens = [symbols.cls]
        tokens += tokens_a
        tokens.append(symbols.sep)
        tokens += tokens_b
        tokens.append(symbols.sep)
        start_b = len(tokens_a) + 2
        candidates = words = None
        if clean or not (symbols.cls in tokens_a or symbols.sep in tokens_a or
                         symbols.cls in tokens_b or symbols.sep in tokens_b):
            # [CLS] and [SEP] are only where they were just put.
            if self.options.do_whole_word_mask:
                flags = bytearray(1)
                if word_starts is None:
                    flags += bytes(map(symbols.starts_word, tokens_a))
                    flags.append(0)
                    flags += bytes(map(symbols.starts_word, tokens_b))
                else:
                    _add_flags(flags, word_starts[doc_index][first:first + split], cuts[0],
                               cuts[1])
                    flags.append(0)
                    document_b, first_b, count_b = source_b
                    _add_flags(flags, word_starts[document_b][first_b:first_b + count_b],
                               cuts[2], cuts[3])
                flags.append(1)
                candidates, words = _word_starts(flags, start_b - 1)
            else:
                candidates = list(range(1, start_b - 1))
                candidates += range(start_b, len(tokens) - 1)
        positions, labels = self._mask_in_place(tokens, candidates, words)
        return (tokens, start_b, positions, labels, is_random_next), unused

    def _random_segment(self, segment, documents, doc_index, target_length):
        """Appends sentences of a random other document, from a random start, to `segment`.

        Returns (its document number, the first sentence, the number of sentences).
        """
        draws = self.draws
        # Up to 10 tries to avoid the current document; a tiny corpus may fail.
        for _ in range(10):
            other = draws.randint(0, len(documents) - 1)
            if other != doc_index:
                break
        document = documents[other]
        start = draws.randint(0, len(document) - 1)
        count = 0
        for sentence in document[start:]:
            segment += sentence
            count += 1
            if len(segment) >= target_length:
                break
        return other, start, count

    # -- masking ------------------------------------------------------------

    def mask(self, tokens):
        """Returns (masked copy of `tokens`, sorted masked positions, original labels)."""
        masked = list(tokens)
        positions, labels = self._mask_in_place(masked, None)
        return masked, positions, labels

    def _mask_in_place(self, tokens, candidates, words=None):
        """Masks `tokens` in place; returns (sorted positions, original tokens there).

        candidates: the maskable positions (lists of positions with whole word
        masking; or the words' first positions, with `words` as _word_starts gives)
        when the caller knows them; found from the tokens when None.
        """
        symbols, draws = self.symbols, self.draws
        if candidates is None:
            candidates = self._candidate_groups(tokens)
        draws.shuffle(candidates)
        n = len(tokens)
        budget = self._budgets[n] if n < len(self._budgets) else self._budget(n)

        if words is not None:
            chosen = _chosen_words(candidates, words, budget)
        elif self.options.do_whole_word_mask:
            chosen = []
            for group in candidates:
                if len(chosen) >= budget:
                    break
                # A word that does not fit in what is left is skipped whole.
                if len(chosen) + len(group) <= budget:
                    chosen += group
        else:
            chosen = candidates[:budget]

        positions = sorted(chosen)
        labels = [tokens[p] for p in positions]
        random_value = draws.random
        mask_value = symbols.mask
        replacements = symbols.replacements
        for position in chosen:
            # 80% [MASK], 10% unchanged, 10% a random vocabulary entry.
            if random_value() < 0.8:
                tokens[position] = mask_value
            elif random_value() >= 0.5:
                tokens[position] = replacements[draws.randint(0, len(replacements) - 1)]
        return positions, labels

    def _candidate_groups(self, tokens):
        """Maskable positions: one per token, or lists of positions per whole word."""
        cls, sep = self.symbols.cls, self.symbols.sep
        if not self.options.do_whole_word_mask:
            return [i for i, token in enumerate(tokens) if token != cls and token != sep]
        is_continuation = self.symbols.is_continuation
        groups = []
        for i, token in enumerate(tokens):
            if token == cls or token == sep:
                continue
            if groups and is_continuation(token):
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups


def _add_flags(flags, sentence_flags, front, back):
    """Appends the flags of a segment's sentences to `flags`, less the `front` and
    `back` ones its truncation cut."""
    mark = len(flags)
    for sentence in sentence_flags:
        flags += sentence
    if front or back:
        del flags[len(flags) - back:]
        del flags[mark:mark + front]


def _word_starts(flags, sep):
    """The whole words of [CLS] A [SEP] B [SEP], for _mask_in_place and _chosen_words.

    flags: a bytearray, per position 1 where a word starts: 0 at [CLS], at the [SEP]
    between the segments (position `sep`) and at "##" pieces, 1 at the last [SEP]
    (where every word ends); 1 is set at position 1 (a leading "##" piece has no
    word to join). A "##" piece joins the word before it, as in _candidate_groups,
    also the first piece of B (the word then spans the [SEP]).
    Returns (the first position of every word, in order; (flags, sep)).
    """
    flags[1] = 1
    return list(itertools.compress(range(len(flags) - 1), flags)), (flags, sep)


def _chosen_words(starts, words, budget):
    """The positions the words starting at `starts` (shuffled) mask, in that order:
    words are taken while fewer than `budget` positions are; one that does not fit in
    what is left is skipped whole. words: (flags, sep) as _word_starts gives."""
    flags, sep = words
    chosen = []
    count = 0
    for start in starts:
        if count >= budget:
            break
        if flags[start + 1]:
            # A word of one token (most words): it always fits.
            chosen.append(start)
            count += 1
            continue
        word = [start]
        end = start + 1
        while not flags[end]:
            if end != sep:
                word.append(end)
            end += 1
        if count + len(word) <= budget:
            chosen += word
            count += len(word)
    return chosen


def truncate_pair(tokens_a, tokens_b, max_num_tokens, random_value):
    """Cuts tokens from the longer list (random end) until both fit in max_num_tokens.

    One token goes per step, from `tokens_b` on a tie, from the front when
    random_value() < 0.5 else from the back. The steps are counted first and the
    lists cut once at the end (same result as cutting step by step).

    Returns (front_a, back_a, front_b, back_b): how many tokens went from each end.
    """
    len_a, len_b = len(tokens_a), len(tokens_b)
    front_a = back_a = front_b = back_b = 0
    for _ in range(len_a + len_b - max_num_tokens):
        if len_a > len_b:
            len_a -= 1
            if random_value() < 0.5:
                front_a += 1
            else:
                back_a += 1
        else:
            len_b -= 1
            if random_value() < 0.5:
                front_b += 1
            else:
                back_b += 1
    if front_a or back_a:
        del tokens_a[len(tokens_a) - back_a:]
        del tokens_a[:front_a]
    if front_b or back_b:
        del tokens_b[len(tokens_b) - back_b:]
        del tokens_b[:front_b]
    return front_a, back_a, front_b, back_b
