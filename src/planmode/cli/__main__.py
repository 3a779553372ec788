"""``python -m planmode.cli``."""

from planmode.cli.app import main

main()
