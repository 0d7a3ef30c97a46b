"""Running LIBERO's and robomimic's own dataset code in this environment.

robomimic 0.2.0 (what LIBERO's training code loads demonstrations with) still calls ``np.bool``,
which numpy removed in 1.24; the environment pins numpy 1.26 (robosuite 1.4's masks need < 2).
:func:`robomimic_numpy_compat` restores the alias (``bool``) so ``SequenceDataset`` samples work;
call it before using robomimic's datasets. Nothing of ours needs it.
"""

from __future__ import annotations

import numpy as np


def robomimic_numpy_compat() -> None:
    """Restore ``np.bool`` (= ``bool``) where numpy no longer has it (idempotent)."""
    if "bool" not in np.__dict__:
        np.bool = bool  # type: ignore[attr-defined]
