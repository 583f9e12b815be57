"""bert_tf2.machine: the CPU's instruction sets, first in the suite's and the bench's output."""
import conftest
from bert_tf2 import machine
from conftest import write_text

# A /proc/cpuinfo of two cores (only the first "flags" line counts) and what it says.
SAPPHIRE_RAPIDS = ("processor\t: 0\nvendor_id\t: GenuineIntel\n"
                   "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 "
                   "amx_bf16 amx_tile amx_int8\n\nprocessor\t: 1\nflags\t\t: fpu sse2\n")


def test_isa_summary_names_each_set_and_the_flags_that_show_it(tmp_path):
    path = write_text(tmp_path / "cpuinfo", SAPPHIRE_RAPIDS)
    assert machine.cpu_flags(path) >= {"avx2", "avx512f", "amx_tile"}
    assert "fpu sse2" not in machine.cpu_flags(path)
    assert machine.isa_summary(path=path) == (
        "AVX2 yes, AVX-512 yes, VNNI yes (avx512_vnni), AMX yes (amx_tile, amx_bf16, "
        "amx_int8), bf16 yes (avx512_bf16, amx_bf16)")
    # The AVX2-only CPU of issue 57 (AVX-VNNI, no AVX-512), and one without AVX2.
    assert machine.isa_summary({"avx", "avx2", "fma", "avx_vnni"}) == (
        "AVX2 yes, AVX-512 no, VNNI yes (avx_vnni), AMX no, bf16 no")
    assert machine.isa_summary(set()) == "AVX2 no, AVX-512 no, VNNI no, AMX no, bf16 no"


def test_no_cpuinfo_is_unknown(tmp_path):
    missing = str(tmp_path / "absent")
    assert machine.cpu_flags(missing) is None
    assert machine.isa_summary(path=missing) == "unknown (no flags in %s)" % missing
    # A cpuinfo without flags (an ARM machine's): unknown too.
    arm = write_text(tmp_path / "arm", "processor\t: 0\nFeatures\t: fp asimd\n")
    assert machine.isa_summary(path=arm) == "unknown (no flags in %s)" % arm


def test_the_suite_prints_it_first():
    lines = []

    class Terminal:  # what pytest_sessionstart asks of pytest's terminal reporter
        @staticmethod
        def write_line(line):
            lines.append(line)

    class Session:
        class config:  # pylint: disable=invalid-name
            class pluginmanager:  # pylint: disable=invalid-name
                @staticmethod
                def get_plugin(name):
                    return Terminal if name == "terminalreporter" else None

    conftest.pytest_sessionstart(Session)
    assert lines == ["CPU ISA: " + machine.isa_summary()]
