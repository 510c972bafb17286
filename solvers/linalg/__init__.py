"""Linear algebra for Markov chains that is not tied to one model: the multifrontal GTH
elimination of a generator in a nested-dissection order (:mod:`.multifrontal`), used by
:mod:`solvers.mapqn`; and the anchored sparse-LU solve of a level-ordered chain
(:mod:`.anchored`), used by the bursty tier's sojourn law and the held-tiers pool chain."""
