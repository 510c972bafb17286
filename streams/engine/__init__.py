"""The engine: the per-system state, its admission of windows, and the pipeline over them."""
