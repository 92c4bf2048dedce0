"""Calibration: fit the roofline cost model's knobs to real measurements (``simkv calibrate``).

``steps`` reads step-level tables, ``fit`` fits (scipy, deterministic), ``runs`` simulates a
measured run's replay for a request-level fit, ``trust`` and ``coverage`` say how far to trust
a fit (held-out error, residual pattern, verdict; the range of steps it saw, the knobs it
extrapolates), ``api`` ties them together for the command. The fitted profile is written and
read by :mod:`simkv.config.profile`, so run configs can name it.
"""
