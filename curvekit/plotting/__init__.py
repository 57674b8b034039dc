"""Charts of steps to result and friends, built with Altair, saved with their provenance."""
