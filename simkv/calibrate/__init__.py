"""Calibration: fit the roofline cost model's knobs to real measurements (``simkv calibrate``).

``steps`` reads step-level tables, ``fit`` fits (scipy, deterministic), ``runs`` simulates a
measured run's replay for a request-level fit, ``profile`` writes and reads the fitted profile
that run configs name.
"""
