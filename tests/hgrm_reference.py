"""Prints the PyPI `hdrhistogram` package's percentile distribution (.hgrm) of the values
(nanoseconds, one per line) read from stdin, as `outputPercentileDistribution(out, 5, 1000.0)`.

The histogram tracks 1 ns to 100 s at 3 significant digits, as dpdk-roce's LatencySeries.
One departure of the PyPI port from the HdrHistogram library (Java, C, .NET, JavaScript) is
undone here: its PercentileIterator does not truncate log2 of the distance to 100 % to an
integer, so its percentile levels run 0.1, 0.19, 0.271... where the library's run 0.1, 0.2,
0.3.... The two others (an unscaled StdDeviation, "TotalCount = %12.3f" in the footer) are
left in the output; tests/hgrm_reference.rs names them.
"""
import math
import sys

from hdrh.histogram import HdrHistogram
from hdrh.iterators import PercentileIterator


def increment_iteration_level(self):
    """The library's tick schedule (Java's `(long)` casts)."""
    self.percentile_to_iterate_from = self.percentile_to_iterate_to
    gap = 100.0 - self.percentile_to_iterate_to
    if gap:
        halvings = int(math.log(100.0 / gap) / math.log(2))
        ticks = self.percentile_ticks_per_half_distance * int(math.pow(2, halvings + 1))
        self.percentile_to_iterate_to += 100.0 / ticks


PercentileIterator.increment_iteration_level = increment_iteration_level

histogram = HdrHistogram(1, 100_000_000_000, 3)
for line in sys.stdin:
    if line.strip():
        histogram.record_value(int(line))
histogram.output_percentile_distribution(sys.stdout.buffer, 1000.0, 5)
