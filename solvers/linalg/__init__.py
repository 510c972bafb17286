"""Linear algebra for Markov chains that is not tied to one model: the multifrontal GTH
elimination of a generator in a nested-dissection order (:mod:`.multifrontal`), used by
:mod:`solvers.mapqn`."""
