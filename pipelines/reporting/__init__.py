"""The release reports: their words, sections, templates, plots and the run's comparison page, rendered from the
metrics pipelines/evaluation computes and the manifest the release stage writes."""
