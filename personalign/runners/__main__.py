"""``python -m personalign.runners COMMAND``: ``personalign run COMMAND`` (:mod:`personalign.cli.run`),
with the same start-up checks and one-line errors as the ``personalign`` command."""

import sys

from personalign.cli import main

main(["run", *sys.argv[1:]])
