"""Stop signals while a command ends: handlers are put back without a traceback."""

from __future__ import annotations

import os
import signal

from rgsd_envs.utils import signals
from rgsd_envs.utils.signals import on_stop_signals, raise_interrupt, restore_signals


def test_a_stop_signal_while_the_handlers_are_put_back_raises_nothing(monkeypatch):
    before = signal.getsignal(signal.SIGTERM)
    previous = on_stop_signals(raise_interrupt)
    assert signal.SIGTERM in previous and signal.getsignal(signal.SIGTERM) is raise_interrupt
    real_signal, sent = signal.signal, []

    def signal_arriving_meanwhile(sig, handler):
        if not sent:  # SIGTERM lands while the stop handler is still installed, as `timeout` or a second kill does
            sent.append(sig)
            os.kill(os.getpid(), signal.SIGTERM)
        return real_signal(sig, handler)

    monkeypatch.setattr(signals.signal, "signal", signal_arriving_meanwhile)
    try:
        assert restore_signals(previous) is True
    finally:
        monkeypatch.undo()
        real_signal(signal.SIGTERM, before)
    assert sent and signal.getsignal(signal.SIGTERM) == before


def test_restoring_without_a_signal_reports_none():
    before = signal.getsignal(signal.SIGTERM)
    previous = on_stop_signals(raise_interrupt)
    assert restore_signals(previous) is False
    assert signal.getsignal(signal.SIGTERM) == before
