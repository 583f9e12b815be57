"""The SQuAD room: run_squad's heads (v1.1, v2.0): question / context windows and
run_squad's n-best, in the SavedModel's graph (export/serving_squad.py), in LiteRT's
decoding (export/litert_batches.py) and in do_predict (tasks/squad_results.py).
"""
from bert_tf2.export.model_types import base
from bert_tf2.export.model_types import litert_door


class Squad(base.ModelType):
    """run_squad's heads (v1.1, v2.0): question / context windows, run_squad's n-best."""
    serving_functions = (
        ("serving_default", "serve_squad", (("question", 1), ("context", 1)), None),
        ("answer", "answer", (("question", 1), ("context", 1)), None))
    # run_squad's prediction settings (exports before they were recorded: its defaults).
    litert_info_fields = (("max_query_length", "count"), ("doc_stride", "count"),
                          ("n_best_size", "count"), ("max_answer_length", "count"),
                          ("version_2_with_negative", "bool"),
                          ("null_score_diff_threshold", "number"))

    def serving_outputs(self, module, model, features):
        # Its logits at every position of the request are outputs: no skip_padding.
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        out = model(features, training=False)
        return {"start_logits": tf.cast(out["start_logits"], tf.float32),
                "end_logits": tf.cast(out["end_logits"], tf.float32)}

    def serving_state(self, tokenizer, max_seq_length, squad_rules, top_k):
        squad_rules.check(max_seq_length)
        return {"squad_tokens": tokenizer.token_table()}  # id -> piece

    def export_info(self, module):
        return module.squad_rules.to_dict()

    def answer_rules(self, settings):
        from bert_tf2.export import serving_squad  # pylint: disable=import-outside-toplevel
        return serving_squad.rules_of(settings.part(*serving_squad.SETTINGS))

    def unused_flags(self, settings, multilabel):
        if settings.version_2_with_negative:
            return []
        return [("null_score_diff_threshold", "without --version_2_with_negative")]

    def litert_examples(self, path, tokenizer, max_seq_length, limit, labels, columns,
                        doc_stride, squad_rules):
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.export import serving_squad
        return litert_batches.squad_file_batch(path, tokenizer, max_seq_length, limit,
                                               squad_rules or serving_squad.SquadRules())

    def litert_file_settings(self, settings):
        return {"squad_rules": self.answer_rules(settings)}

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.squad_predictions(outputs, batch, do_lower_case)

    def litert_count(self, batch):
        return len(batch.extra[0])

    def _agreement(self, want, found):
        return litert_door.share_equal((want.predictions[k], found.predictions[k])
                            for k in want.predictions)

    def _metric(self, found, batch):
        from bert_tf2.tasks import squad_results  # pylint: disable=import-outside-toplevel
        # SQuAD 2.0 (the export's rules): the official 2.0 script's F1, unanswerable
        # questions included.
        version_2 = bool(batch.extra[2].version_2_with_negative)
        return "f1", float(squad_results.evaluate_predictions(batch.gold, found,
                                                              version_2)["f1"])

    def litert_batch(self, predictor, texts, texts_b):
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.tasks import squad_data
        questions, contexts = squad_data.predict_pairs(texts, texts_b)
        return litert_batches.squad_batch(
            litert_batches.squad_examples(questions, contexts), predictor.tokenizer,
            predictor.max_seq_length, predictor.squad_rules)

    def squad_predictions(self, predictor, batch):
        """squad_results.SquadPredictions of a squad Batch (questions whose context has no
        piece have no window, and answer as run_squad's do)."""
        outputs = predictor.run(batch.features) if len(batch.features["input_ids"]) else {}
        return self.litert_decode(outputs, batch, predictor.labels,
                                  predictor.info["do_lower_case"], None)

    def litert_predict(self, predictor, texts, texts_b):
        batch = self.litert_batch(predictor, texts, texts_b)
        found = self.squad_predictions(predictor, batch)
        return [found.predictions[e.qas_id] for e in batch.extra[0]]

    def litert_answers(self, predictor, questions, contexts):
        from bert_tf2.tasks import squad_results  # pylint: disable=import-outside-toplevel
        batch = self.litert_batch(predictor, questions, contexts)
        found = self.squad_predictions(predictor, batch)
        return [squad_results.answer_of(found, e.qas_id) for e in batch.extra[0]]


ENTRY = Squad(
    "squad", "run_squad", ("squad v1.1", "squad v2.0"),
    build=base.head_builder("BertSquad"), listed_after="classifier", tf1=True,
    litert=True, signature="squad",
    sequence_axes=base.axes(start_logits=1, end_logits=1), trims_by_default=False,
    litert_outputs=("start_logits", "end_logits"),
    litert_compared=("start_logits", "end_logits"),
    flags=("max_query_length", "max_answer_length", "n_best_size", "doc_stride",
           "version_2_with_negative", "null_score_diff_threshold"),
    hf_class="BertForQuestionAnswering", hf_pooler=False,
    hf_head_keys=(("cls/squad/output_weights", "qa_outputs.weight"),
                  ("cls/squad/output_bias", "qa_outputs.bias")),
    held_marks=("cls/squad/output_weights", "cls/squad/output_bias"))
