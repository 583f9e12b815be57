"""Loads HuggingFace folders written by `convert_hf_checkpoint.py --direction=to_hf` the way a
torch user would, and prints what they compute (run in the peer venv of `make bench`, which has
torch, transformers and sentence-transformers; nothing of bert-tf2 is imported here).

Usage: python hf_peer_check.py REQUEST.json OUTPUT.json
REQUEST: {"folders": [{"dir", "head", "texts", "pairs" (optional), "choices" (optional)}]};
a folder with "pipeline" ({"task", "make", "call"}) gives {"pipeline": its results} instead.
OUTPUT: per folder {"class", "ids" (the tokenizer's input ids per text), "outputs" {name: list},
"labels" (config's id2label), "sentence" (SentenceTransformer vectors, when asked)}.
With "arrays_file" (a path ending .npz) in REQUEST, the "outputs" lists go into that file
instead (numpy's savez, key "<folder index>/<name>") and OUTPUT's "outputs" name the keys:
millions of floats (a pretraining head's logits) are read back at once, not parsed as text.
"""
import json
import sys

import torch
import transformers

_AUTO = {
    "pretraining": transformers.AutoModelForPreTraining,
    "classifier": transformers.AutoModelForSequenceClassification,
    "tagger": transformers.AutoModelForTokenClassification,
    "squad": transformers.AutoModelForQuestionAnswering,
    "multiple_choice": transformers.AutoModelForMultipleChoice,
    "encoder": transformers.AutoModel,
}


def _pipeline(folder):
    """transformers' pipeline as docs/huggingface.md writes it: {"task", "make" (its
    arguments), "call" (those of the call)} -> its results for the texts."""
    asked = folder["pipeline"]
    run = transformers.pipeline(asked["task"], model=folder["dir"], **asked.get("make", {}))
    results = run(folder["texts"], **asked.get("call", {}))
    return [_plain(r) for r in results]


def _plain(result):
    """A pipeline's result as JSON: lists (fill-mask: one per [MASK]) kept, scores float."""
    if isinstance(result, list):
        return [_plain(e) for e in result]
    return {k: (float(v) if k == "score" else v) for k, v in result.items()
            if k not in ("start", "end")}


def _run(folder):
    if folder.get("pipeline"):
        return {"pipeline": _pipeline(folder)}
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder["dir"])
    # A head without an Auto class here: the class its config.json names (a new head's).
    with open("%s/config.json" % folder["dir"], encoding="utf-8") as f:
        named = getattr(transformers, json.load(f)["architectures"][0])
    model = _AUTO.get(folder["head"], named).from_pretrained(folder["dir"]).eval()
    texts = folder["texts"]
    pairs = folder.get("pairs")
    result = {"class": type(model).__name__, "tokenizer": type(tokenizer).__name__,
              "labels": model.config.id2label, "max_length": tokenizer.model_max_length}
    if folder["head"] == "multiple_choice":
        first = [c[0] for c in folder["choices"] for _ in c[1]]
        second = [e for c in folder["choices"] for e in c[1]]
        batch = tokenizer(first, second, padding="max_length", max_length=folder["length"],
                          return_tensors="pt")
        shaped = {k: v.reshape(len(folder["choices"]), -1, v.shape[-1]) for k, v in batch.items()}
        with torch.no_grad():
            result["outputs"] = {"logits": model(**shaped).logits.tolist()}
        return result
    batch = tokenizer(texts, pairs, padding="max_length", max_length=folder["length"],
                      truncation=True, return_tensors="pt")
    result["ids"] = batch["input_ids"].tolist()
    result["segments"] = batch["token_type_ids"].tolist()
    with torch.no_grad():
        out = model(**batch)
    result["outputs"] = {key: value.tolist() for key, value in out.items()
                         if isinstance(value, torch.Tensor) and key != "hidden_states"}
    if "seq_relationship_logits" in out:  # ours are log-probabilities
        result["outputs"]["seq_relationship_logits_log_softmax"] = torch.log_softmax(
            out["seq_relationship_logits"], -1).tolist()
    if folder.get("sentence"):
        from sentence_transformers import SentenceTransformer  # pylint: disable=import-outside-toplevel
        encoder = SentenceTransformer(folder["dir"], device="cpu")
        result["sentence"] = encoder.encode(texts, convert_to_numpy=True).tolist()
    return result


def _outputs_apart(results, path):
    """Moves each result's "outputs" lists into the .npz file `path` (float64, the values
    the JSON text would give), leaving {name: its key} in their place."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    arrays = {}
    for index, result in enumerate(results):
        for name, value in result.get("outputs", {}).items():
            key = "%d/%s" % (index, name)
            arrays[key] = np.asarray(value, np.float64)
            result["outputs"][name] = key
    np.savez(path, **arrays)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    torch.manual_seed(0)
    results = [_run(folder) for folder in request["folders"]]
    if request.get("arrays_file"):
        _outputs_apart(results, request["arrays_file"])
    # json.dumps, not json.dump: the same text from the C encoder (json.dump's streaming
    # encoder is pure Python, seconds longer for a pretraining head's logits).
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(json.dumps(results))


if __name__ == "__main__":
    main()
