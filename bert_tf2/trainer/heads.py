"""The task models moved to bert_tf2/heads.py; this old import path gives the same objects."""
from bert_tf2.heads import (  # noqa: F401
    FORBIDDEN, TAG_SCHEMES, BertClassifier, BertMaskedLM, BertMultipleChoice, BertPretrainer,
    BertSquad, BertTagger, CrfTransitions, MaskedLMHead, OutputProjection, PretrainingHeads,
    SquadHead, Transform, crf_constraints, crf_negative_log_likelihood, crf_predictions, dummy_features,
    first_pieces, iob2_parts, masked_lm_loss, masked_lm_loss_from_logits, next_sentence_loss,
    reads_padding, weighted_next_sentence_loss)
