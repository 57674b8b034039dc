"""The Parquet store: layout, writer, reader, catalog and updates."""
