"""Oxford-pets segmentation ETL (see README.md)."""
