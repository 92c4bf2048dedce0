"""Scheduling policies, one module each; every module registers its class with
:func:`simkv.engine.registry.register` (the registry imports them all)."""
