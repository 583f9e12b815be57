"""Examples of a LiteRT export: calibration / agreement files and raw texts turned into the
model's id features, and model outputs turned back into labels, vectors, tags and answers.

Each head says how (head_types: its litert_examples, litert_decode, litert_batch); the
pieces they use are litert_batches'. The featurization is the runners' own (glue_data,
ner_data, squad_data), so a LiteRT model sees exactly the ids FullTokenizer and the
reference's packing give. Nothing here imports LiteRT: it works on numpy arrays.
"""
from bert_tf2.export import head_types
from bert_tf2.export import litert_batches

MODEL_TYPES = head_types.LITERT
ID_KEYS = litert_batches.ID_KEYS
# features: {ID_KEYS: int32 [N, S]}; gold: per-example labels (None: the file has none);
# extra: what decoding needs (tagger: (ConllFile, features); squad: (examples, features,
# articles or None, serving_squad.SquadRules); masked_lm: each text's number of [MASK]s).
Batch = litert_batches.Batch
check_file = litert_batches.check_file
text_batch = litert_batches.text_batch
tagger_batch = litert_batches.tagger_batch
crf_tag_ids = litert_batches.crf_tag_ids


def read_file(model_type, flag, path, tokenizer, max_seq_length, limit, labels=None,
              columns=("text", None, "label"), doc_stride=None, squad_rules=None):
    """The first `limit` examples of a data file as a Batch.

    Args:
      model_type: one of MODEL_TYPES; the file is what its runner reads (its head's
        litert_examples): a TSV / CSV / JSONL of texts (classifier, encoder; `columns` =
        text_a, text_b or None, label), CoNLL (tagger), SQuAD JSON (squad), texts with
        [MASK]s one per line (masked_lm, masked_lm.read_texts: extract_features
        --fill_mask_top_k's input).
      flag: the flag naming the file, for messages ("--calibration_file", without its
        value: the messages name the path once).
      tokenizer: a tokenization.FullTokenizer.
      labels: classifier / tagger: the model's label list ([None]: regression).
      doc_stride: tagger: run_ner's --doc_stride, its windows (None: run_ner's default).
      squad_rules: squad: the export's serving_squad.SquadRules (None: run_squad's
        defaults).

    Returns:
      a Batch; ValueError (one line naming the file and line) on a bad file.
    """
    check_file(flag, path)
    head = head_types.find(model_type)
    try:
        return head.litert_examples(path, tokenizer, max_seq_length, limit, labels, columns,
                                    doc_stride, squad_rules)
    except (ValueError, KeyError, TypeError) as e:
        # Each message names the file (and line) once; a KeyError's is its key's repr.
        text = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise ValueError("%s: %s" % (flag, text)) from None


def decode(model_type, outputs, batch, labels=None, do_lower_case=True, crf=None):
    """Per-example predictions of model outputs ({name: array}) on `batch` (its head's
    litert_decode).

    crf: a --crf tagger's (transitions, start_penalty): its tags are Viterbi's
    (crf_tag_ids), not the argmax of the logits; outputs with "tag_ids" [N, S] (decoded
    elsewhere) give those.

    Returns: classifier: class indexes (regression: floats); encoder: the vectors [N, D];
    tagger: per sentence its words' tags; squad: the answer texts, by question id
    (run_squad's n-best rules over every window); masked_lm: per text, per [MASK], the
    top-k token ids.
    """
    return head_types.find(model_type).litert_decode(outputs, batch, labels, do_lower_case,
                                                     crf)
