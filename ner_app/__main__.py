"""``python -m ner_app COMMAND`` and the ``ner-app`` script: the door to the command line (``ner_app.cli``)."""

from __future__ import annotations

import sys

from ner_app.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
