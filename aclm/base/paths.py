"""Where the project lives: its root and its ``configs/`` folder.

A leaf module (standard library only), so any module can import it without
pulling in the configuration machinery.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = PROJECT_ROOT / "configs"
