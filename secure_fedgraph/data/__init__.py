"""Datasets, one class per dataset, each declaring its raw files. Nothing is ever downloaded.

A data directory is taken from the ``data_dir`` argument (the CLI's ``--data-dir``) or the
``SECURE_FEDGRAPH_DATA`` environment variable; what the demo needs ships inside the package. Graph time series have one format and one loader
(graph_series.py, sources.py): every traffic plan reads them by name or folder (``--dataset``).
"""

from secure_fedgraph.data.graph_series import GraphSeries, read_folder, write_folder
from secure_fedgraph.data.hzmetro import HZMetro, MetroSplits, MetroWindows, metro_windows, partition_stations
from secure_fedgraph.data.metr_la import MetrLA, TrafficSplits, dcrnn_windows
from secure_fedgraph.data.planetoid import CitationGraph

# <data dir> folder -> its class; each has check_files(data_dir), which reads nothing (the command line's preflight)
DATASETS = {"metr-la": MetrLA, "hzmetro": HZMetro, "planetoid": CitationGraph}

__all__ = ["DATASETS", "CitationGraph", "GraphSeries", "read_folder", "write_folder", "HZMetro", "MetrLA", "MetroSplits", "MetroWindows", "TrafficSplits", "dcrnn_windows", "metro_windows", "partition_stations"]
