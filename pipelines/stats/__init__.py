"""Statistics the methods and gates share (no DP in them): the kernel Stein discrepancy, the kernel MMD
permutation test, the energy distance. Their DP releases live in pipelines/privacy (mechanisms, accounting) and
pipelines/generators/mechanisms (the energy distance's sampler)."""
