"""This machine's CPU instruction sets, as the test suite and the benchmarks print them first.

Float32 matmuls and reductions round differently on AVX2, AVX-512 and AMX (oneDNN and Eigen
block and sum by vector width), and bf16 runs at full speed only with bf16 units, so
`make test` (tests/conftest.py's report header) and `make bench` (benchmarks/run_all.py) say
which of them this CPU has. Read from /proc/cpuinfo's flags (Linux); where that file is
absent or has no flags line (macOS, Windows), the answer is "unknown". Imports nothing
heavy: the suite's header is printed before TensorFlow is imported.
"""
CPUINFO = "/proc/cpuinfo"

# What is printed, in order: (name, the /proc/cpuinfo flags any one of which shows it).
ISA_FLAGS = (
    ("AVX2", ("avx2",)),
    ("AVX-512", ("avx512f",)),
    ("VNNI", ("avx512_vnni", "avx_vnni")),
    ("AMX", ("amx_tile", "amx_bf16", "amx_int8")),
    ("bf16", ("avx512_bf16", "amx_bf16")),
)


def cpu_flags(path=CPUINFO):
    """The set of flags on the first "flags" line of /proc/cpuinfo, or None where the file
    cannot be read or has no such line (not Linux, or not x86)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def isa_summary(flags=None, path=CPUINFO):
    """One line: "AVX2 yes, AVX-512 no, VNNI yes (avx_vnni), AMX no, bf16 no", naming the
    flags found where several show the same thing; "unknown (no flags in /proc/cpuinfo)"
    when `flags` is None and the file gives none. `flags`: a set of flag names to describe
    instead of this machine's."""
    if flags is None:
        flags = cpu_flags(path)
    if flags is None:
        return "unknown (no flags in %s)" % path
    parts = []
    for name, shown_by in ISA_FLAGS:
        found = [flag for flag in shown_by if flag in flags]
        if not found:
            parts.append("%s no" % name)
        elif len(shown_by) == 1:
            parts.append("%s yes" % name)
        else:
            parts.append("%s yes (%s)" % (name, ", ".join(found)))
    return ", ".join(parts)
