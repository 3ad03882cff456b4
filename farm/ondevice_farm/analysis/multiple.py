"""Error control across the jobs of a suite: Benjamini-Hochberg adjusted p-values.

A suite tests every job each night; at a per-job level of 1%, a 100-job suite would fail on
noise on 1 - 0.99^100 = 63% of nights. Benjamini & Hochberg (1995) control the false discovery
rate: the expected share of flagged jobs that did not change stays below `alpha`. When no job
changed (an unchanged suite, the A/A night) every discovery is false, so the FDR equals the
family-wise error and the chance that the night fails on noise is at most `alpha`; this holds
for independent tests and for positively dependent ones (Benjamini & Yekutieli 2001), which is
how jobs sharing a noisy night behave. When a real change slows many jobs at once (a runtime
or compiler upgrade), BH's threshold rises with the number of them, so it finds them where
Holm's FWER control, which guards against any single false job even on such nights, stays near
Bonferroni's alpha/m for each.
"""

from __future__ import annotations

import numpy as np


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Adjusted p-values (a job is a discovery at level q when its adjusted p-value <= q)."""
    if not p_values:
        return []
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    adjusted_sorted = np.minimum.accumulate(ranked[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(adjusted_sorted, 1.0)
    return [float(v) for v in adjusted]
