"""Each generator's parameters: one pydantic class `Params` per generator (pipelines/parameters.py), whose fields
declare each key's type, default, range and description, and whose validators hold the rules between keys. One
module per generator, named like it, importing no torch, jax or mbi, so `pipelines.config` checks params.yaml
before any method loads."""
