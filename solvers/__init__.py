"""Queueing models and their solution (pure numpy/scipy, no I/O).

Modules: ``processes`` (Markovian arrival processes), ``mva``, ``mapqn``, ``open``, ``bounds``,
``capacity``, ``simulation``.
"""
