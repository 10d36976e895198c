"""Each generator's parameters: its DEFAULTS (one comment per key) and, where it has rules beyond the
types, its `check_params`. One module per generator, named like it, importing no torch, jax or mbi, so
`pipelines.config` checks params.yaml before any method loads."""
