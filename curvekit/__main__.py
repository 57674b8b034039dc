"""``python -m curvekit`` runs the command-line interface."""

from curvekit.cli import main

main()
