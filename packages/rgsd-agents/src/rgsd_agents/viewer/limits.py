"""The ranges of the viewer's controls, shared by its sliders and the ``rgsd view`` flags that set them."""

from __future__ import annotations

SPEED_RANGE = (0.1, 2.0)
"""Simulated seconds per wall-clock second: the speed slider's ends and ``--speed``'s range."""
SPEED_STEP = 0.05
KAPPA_RANGE = (1.0, 1000.0)
"""vMF concentration of the variants: the log10 kappa slider's ends (10^0, 10^3) and ``--kappa``'s range."""
PORT_RANGE = (0, 65535)
"""TCP ports; 0 lets the system pick a free one."""
