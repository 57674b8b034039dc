"""The published archive: its manifest, download, reader, and a generator of test archives."""
