"""How bytes arrive and leave, for every backend: the stream protocol (``stream``), the one
retry-and-resume loop (``resumable``), retry policy and backoff (``backoff``), parallel ranged
reads (``prefetch``), read-ahead (``readahead``), seekable ranged files (``rangefile``) and the
committing writer base (``writer``)."""
