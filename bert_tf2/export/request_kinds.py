"""The kinds of serving_default a head's SavedModel has (head_types.ModelType.signature) and
what a warm-up request of each takes (export/warmup.py). Plain Python: no TensorFlow.
"""
import dataclasses
from typing import Callable, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class Signature:
    """A kind of serving_default (ModelType.signature) and what its requests take.

    Fields:
      name: the ModelType.signature value.
      fields: a warm-up example's tab-separated fields: (least, most, in words).
      requests: the signatures one warm-up example calls first, in order: those every
        head of the kind serves (a head's own signatures beyond them, its room's
        serving_functions, follow them when the export has them: warmup.signature_names).
      data_format: the data format its warm-up rows may come in besides plain lines:
        "table" (.tsv / .csv / .jsonl texts), "conll", "squad_json"; None: lines only.
      data_endings: the file endings read in that format.
      always_data: a LiteRT --calibration_file / --agreement_file (warm-up rows taken
        from it) is read in that format whatever its ending.
      any_ending: every file is read in that format, whatever its ending.
      inputs: a warm-up example's fields (bytes) -> {input name: list}: every input one
        of its signatures takes (each request takes those its signature names; a head's
        own signatures' inputs: its room's warmup_inputs).
    """
    name: str
    fields: Tuple[int, int, str]
    requests: Tuple[str, ...] = ("serving_default",)
    data_format: Optional[str] = None
    data_endings: Tuple[str, ...] = ()
    always_data: bool = False
    inputs: Callable = None
    any_ending: bool = False


SIGNATURES = {signature.name: signature for signature in (
    Signature("pair", (1, 2, "text_a[<TAB>text_b]"), ("serving_default", "serving_text_a"),
              data_format="table", data_endings=(".tsv", ".csv", ".jsonl"),
              inputs=lambda f: {"text_a": f[:1], "text_b": (f[1:] or [b""])[:1]}),
    Signature("words", (1, 10 ** 9, "a sentence"), data_format="conll",
              data_endings=(".conll", ".iob"), always_data=True,
              inputs=lambda f: {"text": [b"\t".join(f)]}),
    Signature("choices", (2, 10 ** 9, "context<TAB>ending[<TAB>ending...]"),
              inputs=lambda f: {"context": f[:1], "endings": [f[1:]]}),
    Signature("squad", (2, 2, "question<TAB>context"), ("answer", "serving_default"),
              data_format="squad_json", data_endings=(".json",), always_data=True,
              inputs=lambda f: {"question": f[:1], "context": f[1:]}),
    Signature("fill_mask", (1, 1, "a text with [MASK]s"), data_format="masked_texts",
              any_ending=True, inputs=lambda f: {"text": [b"\t".join(f)]}),
)}
