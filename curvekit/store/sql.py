"""How text from outside reaches curvekit's SQL: only ever as values.

Values (metric and metaparameter names, goals, statuses, budgets) and file paths are passed
to DuckDB as parameters or through its relation API, never pasted. The store's columns are
fixed by curvekit (``data_manifest/store_schema.json``): no name from the data is ever an
identifier, so curvekit's SQL writes none.

>>> mentions("select * from Trials t", {"trials"})
True
>>> mentions("select 'trials' as name, \\"trials_x\\" from y", {"trials"})
False
"""

from __future__ import annotations

from collections.abc import Collection

import duckdb

__all__ = ["mentions"]


def mentions(sql: str, names: Collection[str]) -> bool:
    """Whether ``sql`` uses one of ``names`` (lower case) as an identifier.

    DuckDB's own tokenizer reads the text, so names inside strings and comments do not
    count; identifiers are compared case-insensitively, as DuckDB resolves them. SQL that
    does not tokenize counts as mentioning them (its error is DuckDB's to report).
    """
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error:
        return True
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    for (start, kind), end in zip(tokens, ends, strict=True):
        if kind == duckdb.token_type.identifier:
            word = sql[start:end].strip().rstrip(",;()").strip()
            if word.startswith('"') and word.endswith('"') and len(word) >= 2:
                word = word[1:-1].replace('""', '"')
            if word.lower() in names:
                return True
    return False
