"""LiteRTPredictor: text in, labels / vectors / tags / answers out, from an export folder's
model_<variant>.tflite (export_saved_model.py --litert).

LiteRT cannot run the tokenizer (tensorflow-text's and our in-graph tokenizer use string
ops LiteRT has no kernels for), so the text is tokenized here in Python by
tokenization.FullTokenizer and packed by the runners' own featurization (litert_data), the
ids the SavedModel's in-graph tokenizer gives. Needs the `[litert]` extra (ai-edge-litert),
imported only when a predictor or runner is made.

    from bert_tf2.export.litert_predictor import LiteRTPredictor
    predictor = LiteRTPredictor("/tmp/sst2_export", variant="dynamic_int8")
    predictor.predict(["a great film", "dull"])
    # -> [{"label": "1", "probabilities": {"0": 0.03, "1": 0.97}}, ...]
"""
import importlib.util
import json
import os

import numpy as np

import tokenization
from bert_tf2.export import litert_data
from bert_tf2.tasks import prediction_files

VARIANTS = ("fp32", "dynamic_int8", "int8")
INFO_FILE = "assets.extra/export_info.json"
VOCAB_FILE = "assets/vocab.txt"
BATCH_SIZE = 32
REPORT_FILE = "litert_report.json"


def model_file(variant):
    """The file name of a variant's LiteRT model in the export folder."""
    return "model_%s.tflite" % variant


def export_files():
    """Every file export_saved_model.py --litert may write in an export folder."""
    return tuple(model_file(v) for v in VARIANTS) + (REPORT_FILE,)


def check_available(flag="--litert"):
    """ValueError in one line when the ai-edge-litert package (the [litert] extra) is
    missing."""
    if importlib.util.find_spec("ai_edge_litert") is None:
        raise ValueError("%s needs the ai-edge-litert package: pip install "
                         "'bert-tf2[litert]' (or pip install ai-edge-litert)" % flag)


class ModelRunner(object):
    """One LiteRT model (a file or bytes) run on id features, BATCH_SIZE rows at a time.

    Args:
      model: a .tflite path or its bytes.
      num_threads: CPU threads of the interpreter (None: LiteRT's default).
    """

    def __init__(self, model, num_threads=None):
        check_available("LiteRT")
        from ai_edge_litert import interpreter  # pylint: disable=import-outside-toplevel
        kwargs = ({"model_content": model} if isinstance(model, bytes)
                  else {"model_path": str(model)})
        self.interpreter = interpreter.Interpreter(num_threads=num_threads, **kwargs)
        self.runner = self.interpreter.get_signature_runner()

    def __call__(self, features, batch_size=BATCH_SIZE):
        """{output name: array} of the model on {ID_KEYS: int32 [N, S]}."""
        num_rows = len(features["input_ids"])
        parts = []
        for start in range(0, num_rows, batch_size):
            parts.append(self.runner(**{k: np.ascontiguousarray(
                features[k][start:start + batch_size], np.int32)
                for k in litert_data.ID_KEYS}))
        if not parts:
            return {}
        return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}


class LiteRTPredictor(object):
    """A LiteRT model of an export folder, called on raw text.

    Args:
      export_dir: the folder export_saved_model.py --litert wrote (model_<variant>.tflite,
        assets/vocab.txt, assets.extra/export_info.json).
      variant: "fp32", "dynamic_int8" or "int8".
      num_threads: CPU threads (None: LiteRT's default).
    """

    def __init__(self, export_dir, variant="int8", num_threads=None):
        if variant not in VARIANTS:
            raise ValueError("variant must be one of %s, got %r" % (", ".join(VARIANTS),
                                                                   variant))
        path = os.path.join(export_dir, model_file(variant))
        if not os.path.isfile(path):
            raise ValueError("%s does not exist: export with --litert=%s" % (path, variant))
        with open(os.path.join(export_dir, INFO_FILE), encoding="utf-8") as f:
            self.info = json.load(f)
        self.model_type = self.info["model_type"]
        self.labels = self.info.get("labels")
        self.max_seq_length = self.info["max_seq_length"]
        self.tokenizer = tokenization.FullTokenizer(os.path.join(export_dir, VOCAB_FILE),
                                                    self.info["do_lower_case"])
        self.run = ModelRunner(path, num_threads)

    def batch(self, texts, texts_b=None):
        """The litert_data.Batch of raw texts (squad: texts = questions, texts_b = contexts)."""
        texts = list(texts)
        if self.model_type == "squad":
            return litert_data.squad_batch(
                litert_data.squad_examples(texts, list(texts_b)), self.tokenizer,
                self.max_seq_length, self.info.get("max_query_length", 64))
        if self.model_type == "tagger":
            return litert_data.tagger_batch(texts, self.tokenizer, self.max_seq_length,
                                            self.labels)
        return litert_data.text_batch(texts, None if texts_b is None else list(texts_b),
                                      self.tokenizer, self.max_seq_length, self.labels)

    def predict(self, texts, texts_b=None):
        """One call from text to results, per text (or pair).

        Args:
          texts: classifier / encoder: the first texts; tagger: the texts; squad: the
            questions.
          texts_b: classifier / encoder: second texts of pairs (optional); squad: the
            contexts.

        Returns:
          classifier: [{"label", "probabilities": {label: p}}] (regression:
          [{"prediction": x}]); encoder: float32 [N, D] sentence vectors; tagger:
          [[(word, tag), ...]] per text; squad: [answer text] per question.
        """
        batch = self.batch(texts, texts_b)
        outputs = self.run(batch.features)
        found = litert_data.decode(self.model_type, outputs, batch, self.labels,
                                   self.info["do_lower_case"])
        if self.model_type == "classifier":  # the shapes of run_classifier.predict
            if "predictions" in outputs:
                return [prediction_files.result(prediction_files.regression_record(None, x))
                        for x in found]
            return [prediction_files.result(prediction_files.classification_record(
                None, row, self.labels)) for row in outputs["probabilities"]]
        if self.model_type == "tagger":
            conll = batch.extra[0]
            return [list(zip(s.words, tags)) for s, tags in zip(conll.sentences, found)]
        if self.model_type == "squad":
            return [found.predictions[e.qas_id] for e in batch.extra[0]]
        return found
