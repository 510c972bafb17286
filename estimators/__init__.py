"""Fitting model parameters to coarse monitoring data (pure numpy/scipy, no I/O).

Modules: ``dispersion`` (index of dispersion, paper 000 Fig. 2), ``demand`` (per-class service
demands: Kalman filter after paper 004, regression after paper 002), ``mapfit`` (MAP(2) fitting
after paper 000 section 4.1).
"""
