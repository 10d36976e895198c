"""Each generator's parameters: its DEFAULTS (one comment per key), its RANGES (each numeric key's Range,
pipelines/ranges.py: what `pipelines.config` checks params.yaml against) and its `check_params` (the same RANGES
for a generator built directly, then the rules beyond types and ranges). One module per generator, named like it,
importing no torch, jax or mbi, so `pipelines.config` checks params.yaml before any method loads."""
