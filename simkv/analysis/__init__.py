"""Analyses built on the KV core: measurements that feed the report (no SimPy, no engine)."""
