"""The parity matrix's HuggingFace door (tests/test_parity_matrix.py): loads the folders
`convert_hf_checkpoint.py --direction=to_hf` wrote with transformers, as a torch user
would, and answers each input the way the matrix compares answers. Runs in the torch peer
venv (as tests/hf_peer_check.py); nothing of bert-tf2 is imported here.

Usage: python parity_peer.py REQUEST.json OUTPUT.json
REQUEST: {"folders": [{"dir", "head", "items", "max_length", "threshold"}]}; head is
classifier, multilabel, regression, tagger, multiple_choice, encoder or fill_mask; items are
texts (multiple_choice: {"context", "endings"} dicts).
OUTPUT: a list per folder of one answer per item: classifier-like {"label", "scores"},
tagger [[word, tag or null], ...] (a word the window does not reach: null), encoder the
mean of the last layer over the real tokens, fill_mask {"tokens", "scores"}: per [MASK]
its 5 likeliest tokens and their probabilities (the text cut to max_length).
"""
import json
import re
import sys

import torch
import transformers

_BLANKS = re.compile("[ \t\r\f\v\n]+")
_AUTO = {"tagger": transformers.AutoModelForTokenClassification,
         "multiple_choice": transformers.AutoModelForMultipleChoice,
         "encoder": transformers.AutoModel, "fill_mask": transformers.AutoModelForMaskedLM}


def _labels(model):
    return [model.config.id2label[i] for i in range(len(model.config.id2label))]


def _classify(folder, model, tokenizer):
    batch = tokenizer(folder["items"], padding=True, truncation=True,
                      max_length=folder["max_length"], return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
    answers = []
    for row in logits:
        if folder["head"] == "regression":
            answers.append({"label": None, "scores": [float(row[0])]})
        elif folder["head"] == "multilabel":
            scores = torch.sigmoid(row)
            chosen = [n for n, p in zip(_labels(model), scores) if p >= folder["threshold"]]
            answers.append({"label": sorted(chosen), "scores": scores.tolist()})
        else:
            scores = torch.softmax(row, -1)
            answers.append({"label": _labels(model)[int(torch.argmax(row))],
                            "scores": scores.tolist()})
    return answers


def _tag(folder, model, tokenizer):
    answers = []
    for text in folder["items"]:
        words = [w for w in _BLANKS.split(text) if w]
        if not words:
            answers.append([])
            continue
        batch = tokenizer(words, is_split_into_words=True, truncation=True,
                          max_length=folder["max_length"], return_tensors="pt")
        with torch.no_grad():
            predicted = model(**batch).logits[0].argmax(-1).tolist()
        tags = [None] * len(words)
        seen = set()
        for position, word in enumerate(batch.word_ids(0)):
            if word is not None and word not in seen:
                seen.add(word)
                tags[word] = _labels(model)[predicted[position]]
        answers.append([[w, t] for w, t in zip(words, tags)])
    return answers


def _choose(folder, model, tokenizer):
    answers = []
    for item in folder["items"]:
        endings = item["endings"]
        batch = tokenizer([item["context"]] * len(endings), endings, padding=True,
                          truncation=True, max_length=folder["max_length"],
                          return_tensors="pt")
        with torch.no_grad():
            logits = model(**{k: v[None] for k, v in batch.items()}).logits[0]
        answers.append({"label": int(torch.argmax(logits)),
                        "scores": torch.softmax(logits, -1).tolist()})
    return answers


def _embed(folder, model, tokenizer):
    batch = tokenizer(folder["items"], padding=True, truncation=True,
                      max_length=folder["max_length"], return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].to(hidden.dtype)
    return ((hidden * mask).sum(1) / mask.sum(1)).tolist()


def _fill(folder, model, tokenizer):
    answers = []
    for text in folder["items"]:
        batch = tokenizer(text, truncation=True, max_length=folder["max_length"],
                          return_tensors="pt")
        with torch.no_grad():
            logits = model(**batch).logits[0]
        masks = (batch["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten()
        top = torch.topk(torch.softmax(logits[masks], -1), 5)
        answers.append({"tokens": [tokenizer.convert_ids_to_tokens(row)
                                   for row in top.indices.tolist()],
                        "scores": top.values.tolist()})
    return answers


def _run(folder):
    head = folder["head"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder["dir"])
    auto = _AUTO.get(head, transformers.AutoModelForSequenceClassification)
    model = auto.from_pretrained(folder["dir"]).eval()
    if head == "tagger":
        return _tag(folder, model, tokenizer)
    if head == "multiple_choice":
        return _choose(folder, model, tokenizer)
    if head == "encoder":
        return _embed(folder, model, tokenizer)
    if head == "fill_mask":
        return _fill(folder, model, tokenizer)
    return _classify(folder, model, tokenizer)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    torch.set_num_threads(1)
    results = [_run(folder) for folder in request["folders"]]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
