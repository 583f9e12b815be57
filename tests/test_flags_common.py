"""flags_common.py: shared flag groups and the required-flag check."""
import pytest

import flags_common


def _define(fv):
    flags_common.define_training_flags(fv)


def test_training_flags_keep_reference_defaults_and_add_port_flags():
    fv = flags_common.parse_flags(_define, [])
    assert fv.use_tpu is False and fv.iterations_per_loop == 1000
    assert fv.dtype == "fp32" and fv.enable_xla is False
    assert fv.num_accumulation_steps == 1 and fv.gradient_checkpointing is False


def test_require_names_the_first_missing_flag():
    fv = flags_common.parse_flags(_define, ["--tpu_name=x"])
    flags_common.require(fv, ["tpu_name"])
    with pytest.raises(ValueError, match=r"^--tpu_zone is required$"):
        flags_common.require(fv, ["tpu_name", "tpu_zone", "gcp_project"])
