"""Tools over whole datasets: ``bench`` (loader throughput against a training step), ``tune``
(the fastest loader setting within a memory budget), ``preview``
(a contact sheet of samples) and ``inspect`` (verify shards, sample sizes), shared by the CLI
and the jobs."""
