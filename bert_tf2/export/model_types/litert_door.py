"""What the runtimes without our in-graph tokenizer ask a head (LiteRT today: --litert's
calibration, decoding and agreement report, and LiteRTPredictor's answers). ModelType
(base.py) takes these methods from LiteRTQuestions; a head's room overrides the ones its
head answers differently.

Contract with export/litert_step.py, litert_batches.py and litert_predictor.py:
litert_info_fields lists the export_info.json fields LiteRTPredictor checks, (field, kind
of value); litert_examples / litert_file_settings read a calibration or agreement file
into a litert_data.Batch; litert_decode turns the numeric graph's outputs into per-example
predictions (the head's own decoding), litert_count / litert_values / litert_agreement
make the report; litert_batch / litert_predict / litert_answers are LiteRTPredictor's
predict() and answers(). They run only for the types LiteRT carries (ModelType.litert).
Nothing is imported at load time: LiteRTPredictor reads the registry without TensorFlow.
"""


def share_equal(pairs):
    """The share of equal (a, b) pairs (1.0 when there are none)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    pairs = list(pairs)
    return float(np.mean([a == b for a, b in pairs])) if pairs else 1.0


class LiteRTQuestions:
    """The LiteRT door's questions, answered for a head answering per text (pair): the
    classifier's shape (run_classifier's texts, texts_b; a share of equal predictions)."""

    # export_info.json fields LiteRTPredictor checks: (field, kind of value).
    litert_info_fields = ()

    def litert_examples(self, path, tokenizer, max_seq_length, limit, labels, columns,
                        doc_stride, squad_rules):
        """A --calibration_file / --agreement_file's first `limit` examples: a
        litert_data.Batch (a table of texts, litert_batches.table_batch)."""
        del doc_stride, squad_rules
        from bert_tf2.export import litert_batches  # pylint: disable=import-outside-toplevel
        return litert_batches.table_batch(path, tokenizer, max_seq_length, limit, labels,
                                          columns, gold=False)

    def litert_file_settings(self, settings):
        """litert_data.read_file's keyword arguments of this head, from `settings`."""
        del settings
        return {}

    def litert_decode(self, outputs, batch, labels, do_lower_case, crf):
        """Per-example predictions of LiteRT / SavedModel outputs on a litert_data.Batch."""
        raise ValueError("LiteRT does not carry --model_type=%s" % self.name)

    def litert_count(self, batch):
        """The number of examples of a litert_data.Batch."""
        return len(batch.features["input_ids"])

    def litert_values(self, values):
        """What the LiteRT report compares of an output (float64 array)."""
        return values

    def litert_agreement(self, want, found, batch, labels, compared):
        """The LiteRT report's agreement (and metric) fields: `want` / `found` decoded from
        the SavedModel's / the variant's outputs, `compared` their (reference, got)
        arrays."""
        del labels, compared
        result = {"agreement": self._agreement(want, found)}
        if batch.gold is not None:
            result["metric_name"], result["metric_fp32"] = self._metric(want, batch)
            result["metric"] = self._metric(found, batch)[1]
        return result

    def _agreement(self, want, found):
        """The share of equal predictions."""
        return share_equal(zip(want, found))

    def _metric(self, found, batch):
        """(name, value in %) of predictions against the batch's gold labels."""
        raise ValueError("%s examples have no gold labels" % self.name)

    def litert_batch(self, predictor, texts, texts_b):
        """The litert_data.Batch of what LiteRTPredictor.predict() is given, read as the
        runner's Predictor.predict reads it (here: run_classifier's texts, texts_b)."""
        # pylint: disable=import-outside-toplevel
        from bert_tf2.export import litert_batches
        from bert_tf2.tasks import data_tables
        from bert_tf2.tasks import predict_inputs
        texts, texts_b = data_tables.texts_of(*predict_inputs.text_pairs(
            texts, texts_b, ("texts", "texts_b"), [("text_a", "text_b")]))
        return litert_batches.text_batch(texts, texts_b, predictor.tokenizer,
                                         predictor.max_seq_length, predictor.labels)

    def litert_predict(self, predictor, texts, texts_b):
        """LiteRTPredictor.predict()'s results (its docstring)."""
        batch = self.litert_batch(predictor, texts, texts_b)
        if not len(batch.features["input_ids"]):
            return self._no_results(predictor)
        outputs = predictor.run(batch.features)
        found = self.litert_decode(outputs, batch, predictor.labels,
                                   predictor.info["do_lower_case"], predictor.crf)
        return self._results(predictor, found, outputs, batch)

    def _no_results(self, predictor):
        del predictor
        return []

    def _results(self, predictor, found, outputs, batch):
        del predictor, outputs, batch
        return found

    def litert_answers(self, predictor, questions, contexts):
        """LiteRTPredictor.answers(): a SQuAD head's answers with their scores."""
        del questions, contexts
        raise ValueError("answers() is for a squad model; this export is a %s: use "
                         "predict()" % predictor.model_type)
