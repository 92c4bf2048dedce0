"""Capacity questions answered directly: the highest offered rate a config sustains within its
SLOs (:func:`simkv.capacity.run.find_capacity`, searched by :mod:`simkv.capacity.search`)."""
