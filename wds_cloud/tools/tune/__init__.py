"""Autotune: find the fastest loader setting within a memory budget by short measured trials
(``tune``, ``wds-cloud tune``, ``make_loader(..., autotune=True)``)."""

from wds_cloud.tools.tune.result import TuneResult
from wds_cloud.tools.tune.space import Setting, Space
from wds_cloud.tools.tune.trial import Trial
from wds_cloud.tools.tune.tuner import tune

__all__ = ["Setting", "Space", "Trial", "TuneResult", "tune"]
