"""The DP mechanisms that belong to one generator method (kernel mean embeddings, the energy sampler, the private
bandwidth, repeat-and-select), beside the generators that use them; the accounting and the shared mechanisms stay
in pipelines/privacy."""
