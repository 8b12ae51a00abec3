"""The CPU plugin's cache of large blocks (backends/cpu/src/allocator.cpp), observed from outside:
a block that is freed and asked for again must come back from the cache, without fresh page
faults, even after other sizes have filled the cache to its cap (the oldest cached blocks make
room). Page faults are the process's minor faults (getrusage), so the test needs Linux."""
import resource
import sys

import pytest

import tessera as ts

MB = 1 << 20


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="minor page faults as Linux counts them")
def test_a_reused_size_stays_cached_after_others_filled_the_cache():
    # Fill the cache past its 1 GB cap with sizes asked for once (untouched: they cost no memory).
    for i in range(12):
        t = ts.empty((100 * MB + i * 4096) // 4)
        del t
    numel = (96 * MB) // 4  # a size none of the above has
    pages = numel * 4 // 4096
    x = ts.ones(numel)  # its first use faults its pages in
    del x
    before = minor_faults()
    for _ in range(4):
        x = ts.ones(numel)  # writes every page: faults only if the block came fresh from the system
        del x
    faults = minor_faults() - before
    assert faults < pages // 2, f"{faults} minor faults over 4 reuses of a {pages}-page block: it was not cached"
