"""``python -m simkv``: the same commands as the ``simkv`` entry point."""

from simkv.cli import app

app()
