"""DP importance weights for released synthetic rows (Ghalebikesabi et al., "Bias mitigated learning from
differentially private synthetic data", §3-4 and appendices A-B).

A weight estimates the likelihood ratio w(x) = p_D(x) / p_G(x) (eq. 2) at each synthetic row, so that
(1/N) Σ w(x_i) h(x_i) over synthetic rows x_i ~ p_G targets E_{p_D}[h]. Modules:

  logistic     L2-regularised logistic regression (Chaudhuri et al. 2011 sensitivity): logreg,
               beta_noised (Ji & Elkan), output_lapl (Cor. 1), output_norm (Cor. 2)
  relaxed_dpsgd  the classifier MLP trained with the relaxed DP-SGD of Algorithm 1: mlp, priv_mlp
  discriminator  weights from a released DP-WGAN critic (post-processing, no budget)
  postprocess  tempering, PSIS with the k̂ diagnostic, beta calibration, effective sample size
  estimators   the registry: plan (public quantities only) and estimate, one entry per params option
  release      the importance-weights gate (PSIS k̂), the manifest entry and the weighted-table join
"""
