"""The large-population network shared by ``bench/accuracy/large_n.py`` and
``bench/speed/large_n.py``: ``bench/speed/decomposition.py``'s ``4 tiers, 2 bursty`` (web 4
cores exp 2 ms, app 8 cores bursty 10 ms, cache 4 cores exp 4 ms, db 16 cores bursty 20 ms,
Mi et al.'s (2008) MAP(2) with I ~ 200; Z = 7 s, knee ~5,600 users) as the pipeline's model,
and a switch forcing the decomposition where the open route would answer."""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np

import streams.predict.model as model_module
from bench.speed.decomposition import networks
from solvers.processes import MAP
from streams.predict.model import SystemModel

NAME = "4 tiers, 2 bursty"


def network() -> tuple[list[MAP], list[int], float]:
    return networks()[NAME]


def system_model(sla: float) -> SystemModel:
    """The network as the pipeline's one-class model with every class's SLA ``sla``."""
    procs, cores, z = network()
    return SystemModel(tiers=["web", "app", "cache", "db"], classes=["a"],
                       D_mc=np.array([[p.mean] for p in procs]), mix=np.array([1.0]),
                       servers=np.array(cores, float), think_time=z, sla=np.array([sla]),
                       processes=[p.scaled(1.0) for p in procs], map_limit=100_000)


@contextlib.contextmanager
def decomposition_only() -> Iterator[None]:
    """Today's route: the decomposition at every population (the open route's threshold out
    of reach)."""
    held = model_module.OPEN_ROUTE_POPULATION
    model_module.OPEN_ROUTE_POPULATION = 10**9
    try:
        yield
    finally:
        model_module.OPEN_ROUTE_POPULATION = held
