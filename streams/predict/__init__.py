"""The model of a system and the questions put to it, from its tiers' estimates (no I/O).

- :mod:`~streams.predict.model`: the closed model (MVA, the exact MAP network or its
  decomposition), the solve's answers, the model's capacity;
- :mod:`~streams.predict.capacity_search`: the largest population within every SLA in few
  probes (a probe of the MAP network is a CTMC solve);
- :mod:`~streams.predict.calibration`: a bursty tier's MAP(2) SCV from its measured response
  time (the degree of freedom mean, ``I`` and p95 leave);
- :mod:`~streams.predict.confidence`: model error per class and tier, the uncertainty band on
  capacity and time to breach;
- :mod:`~streams.predict.story`: why the busiest tier and the breach tier differ, model switches;
- :mod:`~streams.predict.whatif`: candidate actions (replicas, cores, CPU speed, admission
  limit) evaluated on the prediction's own model;
- :mod:`~streams.predict.alert_window`, :mod:`~streams.predict.response_trend`: the alert's
  window and the response-time trend it reads;
- :mod:`~streams.predict.users_trend`: the users trend the time to breach extrapolates;
- :mod:`~streams.predict.rate_trend`: an open workload's rate trend, a change of slope taken
  from the broken line;
- :mod:`~streams.predict.prediction`: a solve's figures assembled into its typed prediction.
"""
