"""Tools over whole datasets: ``bench`` (loader throughput against a training step), ``preview``
(a contact sheet of samples) and ``inspect`` (verify shards, sample sizes), shared by the CLI
and the jobs."""
