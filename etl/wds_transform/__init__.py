"""WebDataset image-resize ETL (see README.md)."""
