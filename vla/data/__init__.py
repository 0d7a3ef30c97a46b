"""Training data before the model's input transforms: samples, sources, mixtures, splits (docs/DATA.md).

``Sample`` / ``SampleSource`` (``sample.py``); demonstrations as action samples (``DemoSource``,
``demos.py``; file layouts in ``layout.py``); the spatial memory's inputs cached per episode
(``MemoryCache``, ``map_input_cache.py``); GST question sets as visual QA (``GSTQASource``,
``gst_qa.py``) and spatial-perception question sets (``SpatialQASource``, ``spatial_qa.py``);
weighted, resumable sampling over sources (``Mixture``, ``mixture.py``); train/val
splits by episode (``split_by_episode``, ``split.py``). numpy and h5py only: every source pickles
and survives ``fork`` (files are opened lazily per process), so a torch DataLoader can wrap it.
"""

from .demos import DemoSource
from .gst_qa import GSTQASource
from .map_input_cache import MemoryCache
from .mixture import Mixture
from .sample import Sample, SampleSource
from .spatial_qa import SpatialQASource
from .split import split_by_episode

__all__ = [
    "DemoSource",
    "GSTQASource",
    "MemoryCache",
    "Mixture",
    "Sample",
    "SampleSource",
    "SpatialQASource",
    "split_by_episode",
]
