"""Fitting model parameters to coarse monitoring data (pure numpy/scipy, no I/O).

Modules: ``dispersion`` (index of dispersion, Mi et al. (2008), Fig. 2), ``demand`` (per-class
service demands: Kalman filter after Huang et al. (2012), regression after Rolia and Vetland
(1995)), ``mapfit`` (MAP(2) fitting after Mi et al. (2008), section 4.1).
"""
