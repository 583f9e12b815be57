"""What the SavedModel door asks a head: export_saved_model's settings (its defaults,
labels, flags and checks) and serving.ServingModule's graph (signatures, outputs, state,
packing, export_info.json fields). ModelType (base.py) takes these methods from
ServingQuestions; a head's room overrides the ones its head answers differently.

Contract with the export (export_saved_model.py, export/exporter.py, export/serving.py):
serving_functions lists the signatures, (name, the module's method `_<method>`, inputs as
(name, rank), the module attribute that must be set for it or None); serving_outputs builds
the outputs in the module's graph; serving_state / export_info the module's extra state and
export_info.json's extra fields; export_labels / export_defaults / export_kwargs /
long_text_of / answer_rules / check_export / unused_flags read the export's Settings.
Nothing is imported at load time (the registry loads without TensorFlow).
"""


class ServingQuestions:
    """The SavedModel door's questions, answered for a head answering per text (pair): the
    encoder's and the classifier's shape."""

    # serving.ServingModule's signatures: (name, its method `_<method>`, inputs as (name,
    # rank), the module attribute that must be set for it or None).
    serving_functions = (
        ("serving_default", "serve_pair", (("text_a", 1), ("text_b", 1)), None),
        ("serving_text_a", "serve_single", (("text_a", 1),), None))
    def serving_outputs(self, module, model, features):
        """Its model's outputs on packed `features` in a serving.ServingModule's graph."""
        raise NotImplementedError("%s is not served" % self.name)

    def serving_state(self, tokenizer, max_seq_length, squad_rules, top_k):
        """{attribute: value} a ServingModule of this head sets beyond the common ones."""
        del tokenizer, max_seq_length, squad_rules, top_k
        return {}

    def export_info(self, module):
        """The fields export_info.json records of this head's export beyond the common ones."""
        del module
        return {}

    def export_labels(self, settings):
        """(labels or None, multilabel) an export_saved_model of this head serves (its
        checks of its own settings first)."""
        del settings
        return None, False

    def export_defaults(self, settings, folder):
        """Defaults of export_saved_model's settings this head has beyond its model
        folder's (`folder`: model_folder.defaults)."""
        del settings, folder
        return {}

    def export_kwargs(self, settings, folder, saved_pooling, bert_config):
        """exporter.export's keyword arguments that only this head reads, from `settings`
        (`folder`: its model folder's defaults, `saved_pooling`: the sentence_embedding.json
        beside --init_checkpoint)."""
        del settings, folder, saved_pooling, bert_config
        return {}

    def long_text_of(self, settings):
        """The long_text.LongText (head_tail, windows) an export serves (None: truncate)."""
        del settings
        return None

    def long_text_mode(self, long_text):
        """The long_text.LongText its pair signatures cut texts by, of the one a
        ServingModule is given (None: truncate)."""
        del long_text
        return None

    def bucket_width(self, trim_padding):
        """The packing of its text signatures: a bucket width (trim_padding: requests
        packed to their longest row, rounded up), or None for max_seq_length."""
        from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
        return input_pipeline.DEFAULT_BUCKET_WIDTH if trim_padding else None

    def answer_rules(self, settings):
        """SQuAD's serving_squad.SquadRules of an export (None: not a SQuAD head)."""
        del settings
        return None

    def check_export(self, settings, multilabel):
        """An export's checks of this head's own flags (after the common ones)."""
        del settings, multilabel

    def unused_flags(self, settings, multilabel):
        """(flag, why) of this head's own flags an export of it would not read."""
        del settings, multilabel
        return []
