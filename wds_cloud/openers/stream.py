"""Deprecated path: see wds_cloud.reexport.MOVED for the new one."""

from wds_cloud.reexport import moved

__getattr__ = moved(__name__)
