"""The published archive, read as it is: its manifest, download, tar stream and records."""
