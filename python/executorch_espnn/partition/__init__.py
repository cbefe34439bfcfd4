"""Partitioning for the ESP-NN backend (imports executorch)."""

from .api import to_espnn_edge
from .partitioner import EspNNPartitioner
from .report import DelegationReport, delegation_report

__all__ = ["DelegationReport", "EspNNPartitioner", "delegation_report", "to_espnn_edge"]
