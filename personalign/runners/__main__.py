"""``python -m personalign.runners COMMAND``: the ``personalign run`` app (:mod:`personalign.cli.run`)."""

from personalign.cli.run import app

app()
