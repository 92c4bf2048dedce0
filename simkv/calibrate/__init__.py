"""Calibration: fit the roofline cost model's knobs to real measurements (``simkv calibrate``).

``steps`` reads step-level tables, ``fit`` fits (scipy, deterministic), ``runs`` simulates a
measured run's replay for a request-level fit, ``api`` ties them together for the command. The
fitted profile is written and read by :mod:`simkv.config.profile`, so run configs can name it.
"""
