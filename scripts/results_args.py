"""The argument the scripts over committed results share: results folders with their tables."""

from __future__ import annotations

import argparse
from pathlib import Path


def results_folders(parser: argparse.ArgumentParser, folders: list[Path]) -> list[Path]:
    """``folders`` if each holds a committed report's tables (data/runs.parquet), else a usage error
    naming the first that does not."""
    for f in folders:
        if not (f / "data" / "runs.parquet").is_file():
            parser.error(f"{f}: no data/runs.parquet there (a results folder with data is needed)")
    return folders
