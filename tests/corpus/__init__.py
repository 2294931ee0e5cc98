"""Corpus builders (SQL, Python, JSON) for the cfgmask tests; see each script."""
