"""wds_cloud: stream WebDataset tar shards from local disk, pipes, HTTP, S3, GCS, AIStore and
SageMaker into PyTorch.
"""

__version__ = "0.1.0"
