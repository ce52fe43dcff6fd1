"""``python -m attnlab ...`` is ``attnlab ...``."""

from attnlab.cli import main

if __name__ == "__main__":
    main()
