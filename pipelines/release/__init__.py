"""What a release publishes, built from plain values: the public manifest (`public_manifest`)."""
