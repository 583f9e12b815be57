"""The torch side of `profile_step.py --what finetuning`: HF transformers' training step on
the same batch, repeated (run in the peer venv).

  python benchmarks/peer_step.py MODEL_DIR BATCH.json STEPS NUM_LABELS

BATCH.json: {"input_ids", "segment_ids", "input_mask", "label_ids"} as profile_step.py
built the batch (padded to its bucket length); torch gets it cut to its longest row, as
DataCollatorWithPadding pads. The step is bench_finetuning's peer step
(peer_finetuning.run_train): BertForSequenceClassification in train mode, loss, backward,
clip to norm 1.0, AdamW, zero_grad. Prints the mean ms of STEPS steps after two untimed
ones, on a line starting "torch finetuning".
"""
import json
import sys
import time

import torch
import transformers


def main(argv):
    """Times the steps of the module docstring and prints the line."""
    model_dir, batch_path, steps, num_labels = argv[1], argv[2], int(argv[3]), int(argv[4])
    torch.set_num_threads(2)
    with open(batch_path, encoding="utf-8") as f:
        rows = json.load(f)
    length = max(sum(mask) for mask in rows["input_mask"])
    batch = {"input_ids": torch.tensor(rows["input_ids"])[:, :length],
             "token_type_ids": torch.tensor(rows["segment_ids"])[:, :length],
             "attention_mask": torch.tensor(rows["input_mask"])[:, :length],
             "labels": torch.tensor(rows["label_ids"])}
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=num_labels)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)

    def step():
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    step()
    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    print("torch finetuning, the same batch cut to %d positions: %.1f ms per step (wall, "
          "mean of %d)" % (length, (time.perf_counter() - start) * 1e3 / steps, steps))


if __name__ == "__main__":
    main(sys.argv)
