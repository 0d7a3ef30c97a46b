"""The learned detector's data, training and evaluation (the network itself and its instances:
:mod:`spatial_memory.detector`). One command: ``python -m vla.detector {render,train,eval}``."""
