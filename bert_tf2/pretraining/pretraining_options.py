"""The generation settings of create_pretraining_data.py, as one picklable value.

A PretrainingOptions holds what decides the records besides the files: lengths,
probabilities, passes, seed and the word segmentation. It travels as a tuple to
the worker processes and Beam workers of the per-file mode, so it holds plain
values only; the face builds it from its settings.
"""
import collections


class PretrainingOptions(collections.namedtuple(
        "PretrainingOptions",
        ["max_seq_length", "max_predictions_per_seq", "masked_lm_prob", "short_seq_prob",
         "dupe_factor", "do_whole_word_mask", "random_seed", "word_segmentation"],
        defaults=(None,))):
    """The generation settings (the flags other than files and workers).

    word_segmentation: None, or a word_boundaries.WordSegmentation (Chinese words).
    """

    def validate(self):
        """Refuses what the reference crashes on; returns warnings for what it caps.

        A --max_seq_length under 5 leaves no room for two segments: the
        reference's assertions fail. Everything else it runs, and so do we, with
        its records: when a full-length sequence asks for more masked positions
        than --max_predictions_per_seq, both mask only that many; a
        --masked_lm_prob or --short_seq_prob outside [0, 1] acts as its nearest
        bound; --dupe_factor below 1 writes no instance.

        Returns:
          A list of one-line warnings (empty for ordinary settings).
        """
        if self.max_seq_length < 5:
            raise ValueError("--max_seq_length must be at least 5 ([CLS], [SEP], [SEP] and "
                             "two tokens), got %d" % self.max_seq_length)
        warnings = []
        wanted = max(1, int(round(self.max_seq_length * self.masked_lm_prob)))
        if wanted > self.max_predictions_per_seq:
            warnings.append(
                "--max_predictions_per_seq=%d caps the masking: a sequence of %d tokens "
                "would get round(%d * %g) = %d masked tokens with --masked_lm_prob=%g, and "
                "gets %d (as the reference does)"
                % (self.max_predictions_per_seq, self.max_seq_length, self.max_seq_length,
                   self.masked_lm_prob, wanted, self.masked_lm_prob,
                   self.max_predictions_per_seq))
        for name in ("masked_lm_prob", "short_seq_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                warnings.append("--%s=%g is outside [0, 1]: it acts as %g"
                                % (name, value, min(max(value, 0.0), 1.0)))
        if self.dupe_factor < 1:
            warnings.append("--dupe_factor=%d: no instance will be written" % self.dupe_factor)
        return warnings
